//! What a batch of proofs took, step by step: the names reports, traces and the CLI share.

use std::time::Duration;

use crate::timeline::{Coverage, Timeline};

/// A step of a proof.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    Synthesis,
    /// On a GPU: uploading a, b, c and the L scalars, while another worker's proof may be
    /// computing. On the CPU: nothing to copy.
    Staging,
    /// a, b, c from a witness and its circuit's recorded constraint system:
    /// sparse products on the GPU beside the bases, or on the CPU.
    Products,
    /// The A and B scalars where the MSMs read them, after the H step: gathered on the
    /// device from the aux values (recorded matrices resident there), or, once selected on
    /// the host, uploaded (on a GPU with the scalars on the device).
    Gather,
    /// Selecting the A and B scalars on the host beside the H step and the H and L MSMs:
    /// not part of a proof's wall time unless it outlasts them.
    ScalarSelection,
    /// The H polynomial: six NTTs on a GPU (`ntt::steps::h_steps`), bellperson's seven on the CPU,
    /// and the division by Z.
    HStep,
    MsmH,
    MsmL,
    MsmA,
    MsmBG1,
    MsmBG2,
    /// The final combination of A, B, C.
    Assembly,
}

impl Step {
    pub const ALL: [Step; 12] = [
        Step::Synthesis,
        Step::Staging,
        Step::Products,
        Step::Gather,
        Step::ScalarSelection,
        Step::HStep,
        Step::MsmH,
        Step::MsmL,
        Step::MsmA,
        Step::MsmBG1,
        Step::MsmBG2,
        Step::Assembly,
    ];

    /// The steps one after another in a proof's wall time, in the order they run: every
    /// step but scalar selection, which runs beside them.
    pub fn sequence() -> impl Iterator<Item = Step> {
        Step::ALL
            .into_iter()
            .filter(|&s| s != Step::ScalarSelection)
    }

    pub fn label(self) -> &'static str {
        match self {
            Step::Synthesis => "synthesis",
            Step::Staging => "staging",
            Step::Products => "products",
            Step::Gather => "A, B scalars",
            Step::HStep => "H step",
            Step::MsmH => "MSM H",
            Step::MsmL => "MSM L",
            Step::MsmA => "MSM A",
            Step::MsmBG1 => "MSM B G1",
            Step::MsmBG2 => "MSM B G2",
            Step::ScalarSelection => "scalar selection",
            Step::Assembly => "assembly",
        }
    }

    /// The H step and the MSMs: what a proof computes on its engine's device.
    pub fn is_gpu_step(self) -> bool {
        matches!(
            self,
            Step::HStep | Step::MsmH | Step::MsmL | Step::MsmA | Step::MsmBG1 | Step::MsmBG2
        )
    }

    fn index(self) -> usize {
        Step::ALL
            .iter()
            .position(|&s| s == self)
            .expect("every step is in ALL")
    }
}

/// What the timeline lanes of device `device`'s workers begin with.
fn device_lanes(device: usize) -> String {
    format!("device {device} worker ")
}

/// The timeline lane of worker `worker` of device `device`: its proofs' steps.
pub fn worker_lane(device: usize, worker: usize) -> String {
    format!("{}{worker}", device_lanes(device))
}

/// What the lane of a worker's B G2 MSM adds to the worker's, where that MSM runs beside
/// the G1 ones.
const G2_BESIDE: &str = " G2";

/// The timeline lane of a worker's B G2 MSM where it runs beside the G1 MSMs.
pub fn g2_lane(worker_lane: &str) -> String {
    format!("{worker_lane}{G2_BESIDE}")
}

/// The worker's lane `lane` belongs to: itself, or the worker whose B G2 MSM ran on it.
pub fn proof_lane(lane: &str) -> &str {
    lane.strip_suffix(G2_BESIDE).unwrap_or(lane)
}

/// What a circuit's synthesis span is named in a timeline, before the circuit's index.
const SYNTHESIZE: &str = "synthesize ";

/// The timeline span of circuit `circuit`'s synthesis.
pub fn synthesis_span(circuit: usize) -> String {
    format!("{SYNTHESIZE}{circuit}")
}

/// Device `device`'s GPU steps in `timeline` from `from` on: the H step and the MSMs. A step's
/// span includes its uploads and read-backs, so the device can idle inside one too: what
/// they leave uncovered bounds the device's idle time from below, it does not measure the GPU.
pub fn gpu_steps(timeline: &Timeline, device: usize, from: Duration) -> Option<Coverage> {
    let lane = device_lanes(device);
    let on_gpu = |name: &str| {
        Step::ALL
            .into_iter()
            .any(|step| step.is_gpu_step() && step.label() == name)
    };
    timeline.coverage(|s| s.start >= from && s.lane.starts_with(&lane) && on_gpu(&s.name))
}

/// The circuits' syntheses in `timeline`: from the first one's start to the last one's end.
pub fn syntheses(timeline: &Timeline) -> Option<Coverage> {
    timeline.coverage(|s| s.name.starts_with(SYNTHESIZE))
}

/// Wall time of each step of a batch, summed over its proofs.
#[derive(Clone, Debug, Default)]
pub struct ProveReport {
    pub backend: String,
    pub proofs: usize,
    pub constraints: usize,
    pub domain: usize,
    /// The whole batch, from the first synthesis to the last proof.
    pub wall: Duration,
    /// Per step of [`Step::ALL`]; synthesis is summed over the circuits, which are
    /// synthesized in parallel and beside the proving.
    times: [Duration; Step::ALL.len()],
}

impl ProveReport {
    /// The time `step` took, summed over the proofs.
    pub fn time(&self, step: Step) -> Duration {
        self.times[step.index()]
    }

    /// Adds `time` to `step`.
    pub fn record(&mut self, step: Step, time: Duration) {
        self.times[step.index()] += time;
    }

    /// Adds `other`'s step times to these.
    pub fn add(&mut self, other: &ProveReport) {
        for step in Step::ALL {
            self.record(step, other.time(step));
        }
    }

    /// Everything after synthesis.
    pub fn after_synthesis(&self) -> Duration {
        self.total() - self.time(Step::Synthesis)
    }

    /// Synthesis and everything after it.
    pub fn total(&self) -> Duration {
        Step::sequence().map(|s| self.time(s)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_steps_are_one_devices_h_step_and_msms_and_syntheses_every_circuits() {
        let timeline = Timeline::new();
        let nap = || std::thread::sleep(Duration::from_millis(2));
        timeline.record("synthesis 0", &synthesis_span(0), nap);
        let lane = worker_lane(0, 0);
        timeline.record(&lane, Step::Staging.label(), nap);
        timeline.record(&lane, Step::HStep.label(), nap);
        timeline.record(&lane, Step::MsmBG2.label(), nap);
        timeline.record(&lane, Step::Assembly.label(), nap);
        timeline.record(&worker_lane(1, 0), Step::MsmH.label(), nap);
        timeline.record("synthesis 1", &synthesis_span(1), nap);
        let spans = timeline.spans();
        let gpu = gpu_steps(&timeline, 0, Duration::ZERO).unwrap();
        assert_eq!((gpu.first, gpu.last), (spans[2].start, spans[3].end));
        assert!(gpu.covered >= Duration::from_millis(4) && gpu.covered <= gpu.span());
        assert!(gpu_steps(&timeline, 0, spans[3].end).is_none());
        assert!(gpu_steps(&timeline, 2, Duration::ZERO).is_none());
        let syntheses = syntheses(&timeline).unwrap();
        assert_eq!(
            (syntheses.first, syntheses.last),
            (spans[0].start, spans[6].end)
        );
    }
}
