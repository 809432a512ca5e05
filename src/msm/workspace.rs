//! The device buffers an MSM plan needs, and the few kept between MSMs within the VRAM budget.

use blstrs::Scalar;

use super::plan::MsmPlan;
use super::program::SCAN_BLOCK;
use crate::curve::GpuCurve;
use crate::error::{Error, Result};
use crate::gpu::pool::{BufferPool, Reservation};
use crate::gpu::GpuContext;

/// Workspaces kept between MSMs: a prover alternates between a few MSM sizes (H, L, A near n;
/// B smaller), and reallocating gigabytes for each cost more than the MSM's sort.
pub const WORKSPACES_KEPT: usize = 2;

/// The most device bytes the MSM kernels keep in workspaces at once for MSMs of `plans` (of points of
/// `xyzz` bytes in the buckets): at most [`WORKSPACES_KEPT`] workspaces, none of them one
/// another could run in (a new workspace frees those that fit in it). Where every plan fits
/// in the largest, as the chunked plans of one proof's G1 MSMs do, that is one workspace.
pub fn kept_bytes(plans: &[MsmPlan], xyzz: u64) -> u64 {
    let held_apart =
        |i: usize, j: usize| !plans[i].fits_in(&plans[j]) && !plans[j].fits_in(&plans[i]);
    (1u32..1 << plans.len().min(16))
        .filter(|set| set.count_ones() as usize <= WORKSPACES_KEPT)
        .filter(|set| {
            let members: Vec<usize> = (0..plans.len()).filter(|i| set & (1 << i) != 0).collect();
            members
                .iter()
                .enumerate()
                .all(|(k, &i)| members[k + 1..].iter().all(|&j| held_apart(i, j)))
        })
        .map(|set| {
            (0..plans.len())
                .filter(|i| set & (1 << i) != 0)
                .map(|i| plans[i].workspace_bytes(xyzz))
                .sum()
        })
        .max()
        .unwrap_or(0)
}

/// Device buffers sized for one plan.
pub(super) struct Workspace {
    pub plan: MsmPlan,
    /// Chunks alternate between the two: one is copied into while the other's chunk runs.
    pub scalars: [wgpu::Buffer; 2],
    /// Per point of a chunk, the windows up to its last digit (msm_count, for msm_scatter).
    pub digit_windows: wgpu::Buffer,
    pub counts: wgpu::Buffer,
    pub cursor: wgpu::Buffer,
    pub sorted: wgpu::Buffer,
    pub keys: [wgpu::Buffer; 2],
    pub points: [wgpu::Buffer; 2],
    /// Every chunk's sums, added in by each chunk's accumulation.
    pub buckets: wgpu::Buffer,
    pub lengths: wgpu::Buffer,
    pub sums: wgpu::Buffer,
    /// Block totals of each scan level.
    pub scan_sums: Vec<wgpu::Buffer>,
    /// Its bytes in the VRAM budget, while it lives.
    _budget: Option<Reservation>,
}

fn storage(gpu: &GpuContext, label: &str, size: u64) -> wgpu::Buffer {
    gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: size.max(16).next_multiple_of(4),
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

/// The lengths of each scan level: the data, then block totals until one block remains.
pub(super) fn scan_levels(len: u64) -> Vec<u64> {
    let mut levels = vec![len];
    while *levels.last().expect("never empty") > SCAN_BLOCK as u64 {
        let last = *levels.last().expect("never empty");
        levels.push(last.div_ceil(SCAN_BLOCK as u64));
    }
    levels
}

impl Workspace {
    fn new<C: GpuCurve>(gpu: &GpuContext, plan: &MsmPlan) -> Self {
        let xyzz = C::XYZZ_BYTES as u64;
        let slots = plan.count_slots();
        let bucket_bytes = plan.layout.total_buckets() * xyzz;
        Workspace {
            plan: plan.clone(),
            scalars: ["msm scalars a", "msm scalars b"].map(|l| {
                storage(
                    gpu,
                    l,
                    plan.chunk as u64 * std::mem::size_of::<Scalar>() as u64,
                )
            }),
            digit_windows: storage(gpu, "msm digit windows", plan.chunk as u64 * 4),
            counts: storage(gpu, "msm counts", slots * 4),
            cursor: storage(gpu, "msm cursor", slots * 4),
            sorted: storage(gpu, "msm sorted", plan.max_entries() * 8),
            keys: ["msm keys a", "msm keys b"].map(|l| storage(gpu, l, plan.max_partials() * 4)),
            points: ["msm partials a", "msm partials b"]
                .map(|l| storage(gpu, l, plan.max_partials() * xyzz)),
            buckets: storage(gpu, "msm buckets", bucket_bytes),
            lengths: storage(gpu, "msm lengths", 4 * (plan.level_bounds.len() as u64 + 1)),
            sums: storage(gpu, "msm group sums", plan.total_groups() as u64 * xyzz),
            scan_sums: scan_levels(slots)
                .iter()
                .map(|&len| storage(gpu, "scan block sums", len.div_ceil(SCAN_BLOCK as u64) * 4))
                .collect(),
            _budget: None,
        }
    }
}

/// The workspaces of one curve's kernels, most recently used last, their bytes counted
/// against a pool's budget when there is one.
#[derive(Default)]
pub(super) struct Workspaces {
    kept: Vec<Workspace>,
}

impl Workspaces {
    /// Frees every kept workspace (and its bytes of the budget).
    pub fn clear(&mut self) {
        self.kept.clear();
    }

    /// A workspace `plan` fits in: a kept one, or a new one (freeing first the kept ones that
    /// fit in it, then the oldest, and more kept ones while the budget or the device refuses
    /// the new one).
    pub fn for_plan<C: GpuCurve>(
        &mut self,
        gpu: &GpuContext,
        pool: Option<&BufferPool>,
        plan: &MsmPlan,
    ) -> Result<&Workspace> {
        let cache = &mut self.kept;
        match cache.iter().position(|w| plan.fits_in(&w.plan)) {
            Some(i) => {
                let ws = cache.remove(i);
                cache.push(ws);
            }
            None => {
                // The new workspace runs every plan these ran: keeping them too would only
                // hold their bytes (see `kept_bytes`).
                cache.retain(|w| !w.plan.fits_in(plan));
                if cache.len() >= WORKSPACES_KEPT {
                    cache.remove(0); // free the oldest before allocating
                }
                let bytes = plan.workspace_bytes(C::XYZZ_BYTES as u64);
                let budget = match pool {
                    Some(pool) => Some(loop {
                        match pool.reserve("an MSM workspace", bytes) {
                            Err(Error::VramBudget { .. }) if !cache.is_empty() => {
                                cache.remove(0); // its bytes go back to the budget
                            }
                            reserved => break reserved?,
                        }
                    }),
                    None => None,
                };
                let allocate = || {
                    gpu.allocating("the MSM workspace", bytes, || {
                        Workspace::new::<C>(gpu, plan)
                    })
                };
                let ws = match allocate() {
                    Err(Error::OutOfMemory { .. }) if !cache.is_empty() => {
                        cache.clear();
                        allocate()?
                    }
                    other => other?,
                };
                cache.push(Workspace {
                    _budget: budget,
                    ..ws
                });
            }
        }
        Ok(cache.last().expect("just filled"))
    }
}
