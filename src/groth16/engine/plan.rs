//! What a parameter set's proofs keep on one device and what they stream, within the
//! engine's VRAM budget: one plan, made by the GPU engine ([`GpuEngine::plan`]), asked for
//! by the prover. Pure arithmetic over the sizes the kernels report, tested without a GPU.
//!
//! The budget goes, in this order, to what every proof needs (the MSM workspaces, the NTT's
//! power tables, and two buffers per curve to stream bases through when some do not fit),
//! to one proof's buffers (a, b, c for the H step, and the L, A, B scalar vectors where
//! they fit, else those scalars are streamed from host memory with each MSM chunk), to the
//! bases (h first: its MSM is the full-width one, then l, a, b_g1, b_g2, each as long a
//! prefix as fits, the rest streamed), and last to more proofs in flight. Constraint
//! matrices take what is left when they arrive ([`DevicePlan::room`]).
//!
//! [`GpuEngine::plan`]: super::GpuEngine::plan

use crate::msm::CHUNK_ALIGN;
use crate::{Error, Result};

/// The device bytes a parameter set's proofs are made of, as the kernels of one device
/// report them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footprint {
    /// One vector of the H step's domain (a, b and c each take one).
    pub domain_vector: u64,
    /// The L, A and B scalar vectors of one proof.
    pub scalar_vectors: u64,
    /// The MSM workspaces and the NTT's power tables, kept while the engine lives.
    pub kept: u64,
    /// The bases of each set in [`BASE_SETS`] order: (points, bytes of one point).
    pub bases: [(usize, u64); 5],
    /// Most points of one MSM chunk of G1 and of G2 (the plans' chunks).
    pub chunk_points: [usize; 2],
}

/// The base sets in the order they are kept resident.
pub const BASE_SETS: [&str; 5] = ["h", "l", "a", "b_g1", "b_g2"];

/// Two stream buffers of a curve take at most this share of the budget (1/32): smaller
/// chunks cost their MSM more passes, larger ones take room from bases.
const STREAM_SHARE: u64 = 32;

/// The plan: what is resident, what streams, how many proofs are in flight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DevicePlan {
    pub budget: u64,
    /// Resident points of each base set ([`BASE_SETS`] order): a prefix, the rest streamed.
    pub resident_points: [usize; 5],
    /// Points per streamed chunk of G1 and of G2 (0: nothing of that curve streams).
    pub stream_points: [usize; 2],
    /// The L, A and B scalars in device vectors; otherwise streamed from host memory.
    pub scalars_on_device: bool,
    /// Proofs in flight at once.
    pub proofs_in_flight: usize,
    /// Bytes of the MSM workspaces, power tables and stream buffers.
    pub kept_bytes: u64,
    /// Bytes of one proof's buffers.
    pub proof_bytes: u64,
    /// Bytes of the resident bases.
    pub resident_bytes: u64,
}

impl DevicePlan {
    /// The plan for `footprint` within `budget` bytes, with at most `workers` proofs in
    /// flight. [`Error::VramBudget`] when not even one proof with every base streamed fits.
    pub fn new(footprint: &Footprint, budget: u64, workers: usize) -> Result<Self> {
        Self::with_bases(footprint, budget, workers, true)
    }

    /// [`new`](Self::new), keeping no base resident unless `keep_bases`.
    pub fn with_bases(
        footprint: &Footprint,
        budget: u64,
        workers: usize,
        keep_bases: bool,
    ) -> Result<Self> {
        let stream = |curve: usize| {
            let point = footprint.bases[if curve == 0 { 0 } else { 4 }].1.max(1);
            let most = footprint.chunk_points[curve].max(1) as u64;
            let fitting = budget / STREAM_SHARE / 2 / point;
            // A power of two, aligned: chunks then cut every set alike.
            let points = most.min(fitting.max(CHUNK_ALIGN));
            let points = if points >= CHUNK_ALIGN {
                1u64 << points.ilog2()
            } else {
                points
            };
            (points as usize, 2 * points * point)
        };
        let [(g1_points, g1_bytes), (g2_points, g2_bytes)] = [stream(0), stream(1)];
        let abc = 3 * footprint.domain_vector;
        let with_scalars = abc + footprint.scalar_vectors;
        let kept_streaming = footprint.kept + g1_bytes + g2_bytes;
        let (scalars_on_device, proof_bytes) = if kept_streaming + with_scalars <= budget {
            (true, with_scalars)
        } else if kept_streaming + abc <= budget {
            (false, abc)
        } else {
            return Err(Error::VramBudget {
                what: "one proof at its smallest (the H step's a, b, c, the MSM workspaces \
                       and power tables, two chunks of streamed bases per curve)"
                    .into(),
                needed: kept_streaming + abc,
                budget,
            });
        };
        let mut left = budget - kept_streaming - proof_bytes;
        let mut resident_points = [0; 5];
        for (resident, &(points, point_bytes)) in resident_points.iter_mut().zip(&footprint.bases) {
            let fitting = match keep_bases {
                true => (left / point_bytes.max(1)) as usize,
                false => 0,
            };
            *resident = if fitting >= points {
                points
            } else {
                fitting - fitting % CHUNK_ALIGN as usize
            };
            left -= *resident as u64 * point_bytes;
        }
        let streams = |sets: &[usize]| {
            sets.iter()
                .any(|&set| resident_points[set] < footprint.bases[set].0)
        };
        let mut stream_points = [g1_points, g2_points];
        let mut kept_bytes = kept_streaming;
        if !streams(&[0, 1, 2, 3]) {
            stream_points[0] = 0;
            kept_bytes -= g1_bytes;
            left += g1_bytes;
        }
        if !streams(&[4]) {
            stream_points[1] = 0;
            kept_bytes -= g2_bytes;
            left += g2_bytes;
        }
        let more = (left / proof_bytes.max(1)) as usize;
        let resident_bytes = resident_points
            .iter()
            .zip(&footprint.bases)
            .map(|(&points, &(_, bytes))| points as u64 * bytes)
            .sum();
        Ok(DevicePlan {
            budget,
            resident_points,
            stream_points,
            scalars_on_device,
            proofs_in_flight: workers.max(1).min(1 + more),
            kept_bytes,
            proof_bytes,
            resident_bytes,
        })
    }

    /// Bytes of the budget nothing in the plan takes (for constraint matrices).
    pub fn room(&self) -> u64 {
        self.room_with(self.proofs_in_flight)
    }

    /// [`room`](Self::room) with `proofs` in flight.
    pub fn room_with(&self, proofs: usize) -> u64 {
        self.budget.saturating_sub(
            self.kept_bytes + self.resident_bytes + self.proof_bytes * proofs as u64,
        )
    }

    /// "budget N MiB".
    pub fn describe_budget(&self) -> String {
        format!("budget {} MiB", self.budget >> 20)
    }

    /// Whether every base is resident.
    pub fn all_resident(&self, footprint: &Footprint) -> bool {
        self.stream_points == [0, 0]
            && self
                .resident_points
                .iter()
                .zip(&footprint.bases)
                .all(|(&resident, &(points, _))| resident == points)
    }

    /// One line: "bases resident (58,368 MiB), scalars on the device, 2 proofs in flight,
    /// budget 131,072 MiB" or what streams.
    pub fn describe(&self, footprint: &Footprint) -> String {
        let mib = |bytes: u64| bytes >> 20;
        let bases = if self.all_resident(footprint) {
            format!("bases resident ({} MiB)", mib(self.resident_bytes))
        } else {
            let sets: Vec<String> = BASE_SETS
                .iter()
                .zip(self.resident_points.iter().zip(&footprint.bases))
                .map(|(name, (&resident, &(points, _)))| match resident {
                    r if r == points => format!("{name} resident"),
                    0 => format!("{name} streamed"),
                    r => format!("{name} {}% resident", r * 100 / points.max(1)),
                })
                .collect();
            format!(
                "bases {} ({} MiB resident; chunks of {} G1, {} G2 points)",
                sets.join(", "),
                mib(self.resident_bytes),
                self.stream_points[0],
                self.stream_points[1]
            )
        };
        let scalars = match self.scalars_on_device {
            true => "scalars on the device",
            false => "scalars streamed from the host",
        };
        format!(
            "{bases}, {scalars}, {} proof(s) in flight, {}",
            self.proofs_in_flight,
            self.describe_budget()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    /// The shape of a 2^27 proof on the H200, near enough: 4 GiB vectors, 12 GiB of G1
    /// bases per set, 24 GiB of G2 bases.
    fn shape_2_27() -> Footprint {
        let n = 1usize << 27;
        Footprint {
            domain_vector: 4 * GIB,
            scalar_vectors: 12 * GIB,
            kept: 2 * GIB,
            bases: [(n, 96), (n, 96), (n, 96), (n / 2, 96), (n / 2, 192)],
            chunk_points: [1 << 25, 1 << 24],
        }
    }

    #[test]
    fn a_large_budget_keeps_every_base_and_two_proofs() {
        let f = shape_2_27();
        let plan = DevicePlan::new(&f, 130 * GIB, 2).unwrap();
        assert!(plan.all_resident(&f));
        assert!(plan.scalars_on_device);
        assert_eq!(plan.proofs_in_flight, 2);
        assert_eq!(plan.kept_bytes, f.kept);
        assert!(plan.room() < 130 * GIB);
    }

    #[test]
    fn smaller_budgets_stream_bases_and_scalars_and_never_exceed_the_budget() {
        let f = shape_2_27();
        for gib in [96, 64, 32, 24, 16] {
            let plan = DevicePlan::new(&f, gib * GIB, 2).unwrap();
            let used = plan.kept_bytes
                + plan.resident_bytes
                + plan.proof_bytes * plan.proofs_in_flight as u64;
            assert!(used <= plan.budget, "{gib} GiB: {plan:?}");
            // h is kept before the others.
            let h_share = plan.resident_points[0] as f64 / f.bases[0].0 as f64;
            for (set, &resident) in plan.resident_points.iter().enumerate().skip(1) {
                assert!(
                    resident == 0 || h_share == 1.0,
                    "{gib} GiB: set {set} before h"
                );
            }
            for points in plan.resident_points {
                assert_eq!(points as u64 % CHUNK_ALIGN, 0);
            }
        }
        let plan = DevicePlan::new(&f, 16 * GIB, 2).unwrap();
        assert!(!plan.scalars_on_device);
        assert_eq!(plan.proofs_in_flight, 1);
        assert!(plan.stream_points[0] > 0 && plan.stream_points[1] > 0);
    }

    #[test]
    fn a_budget_below_one_proof_at_its_smallest_is_an_error() {
        let err = DevicePlan::new(&shape_2_27(), 8 * GIB, 2).unwrap_err();
        assert!(
            matches!(err, Error::VramBudget { needed, .. } if needed > 14 * GIB),
            "{err}"
        );
    }
}
