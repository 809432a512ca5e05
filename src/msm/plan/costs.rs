//! What a plan needs to know of one curve's points: their sizes on the device, and the loop
//! trips an addition makes where a software adapter caps them.

use crate::gpu::MAX_LOOP_TRIPS;

/// Entries an accumulation thread may take. Each segment leaves two partial slots for the
/// next level, so a list of t + 1 entries shrinks to 4 slots: segments below 4 never end.
pub const SEGMENTS: std::ops::RangeInclusive<u32> = 4..=1024;

/// What a plan needs of one curve's points on one wide-multiply path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointCosts {
    /// Bytes of an affine base on the GPU.
    pub affine_bytes: u64,
    /// Bytes of an XYZZ accumulator.
    pub xyzz_bytes: u64,
    /// Loop trips of one `xyzz_add` as llvmpipe counts them ([`MAX_LOOP_TRIPS`]).
    pub addition_loop_trips: u32,
    /// The loop trips an invocation may make in all (`GpuContext::loop_cap`): `None` on GPUs,
    /// whose plans then need not pay for llvmpipe's cap (capped plans measured slower on a
    /// GPU: docs/benchmarks/gpu-part-2-27.md, commit 0559c8d).
    pub loop_cap: Option<u32>,
    /// What reducing one bucket costs, in accumulation additions (`GpuCurve::BUCKET_COST`).
    pub bucket_cost: u64,
}

impl PointCosts {
    /// `xyzz_add` (shaders/curve.wgsl) loops over up to 15 steps, one field multiplication
    /// of `field_mul_loop_trips` each, and the loop's exit. Under llvmpipe's cap: see
    /// [`PointCosts::with_loop_cap`].
    pub const fn new(affine_bytes: u64, xyzz_bytes: u64, field_mul_loop_trips: u32) -> Self {
        PointCosts {
            affine_bytes,
            xyzz_bytes,
            addition_loop_trips: 16 + 15 * field_mul_loop_trips,
            loop_cap: Some(MAX_LOOP_TRIPS),
            bucket_cost: 4,
        }
    }

    /// The same costs with a bucket of the reduction costing `bucket_cost` additions.
    pub const fn with_bucket_cost(self, bucket_cost: u64) -> Self {
        PointCosts {
            bucket_cost,
            ..self
        }
    }

    /// The same costs under `loop_cap` (`None`: loops run as long as they are written).
    pub const fn with_loop_cap(self, loop_cap: Option<u32>) -> Self {
        PointCosts { loop_cap, ..self }
    }

    /// Iterations of one loop, one addition each, that stay under the cap.
    pub fn iterations_under_cap(&self) -> u32 {
        self.loop_cap
            .map_or(u32::MAX, |cap| cap / (1 + self.addition_loop_trips))
    }

    /// The longest accumulation segment: a thread's loop makes segment + 1 iterations, one
    /// addition each at most, and its exit.
    pub fn longest_segment(&self) -> u32 {
        self.iterations_under_cap()
            .saturating_sub(2)
            .min(*SEGMENTS.end())
    }

    /// The most buckets one reduction group may hold with windows of `window_bits`: two
    /// iterations per bucket, then up to two per bit of the group's offset (below
    /// 2^window_bits), the switch between the two and the exit.
    pub(super) fn most_buckets_per_group(&self, window_bits: u32) -> u32 {
        (self
            .iterations_under_cap()
            .saturating_sub(2 * window_bits + 2)
            / 2)
        .max(1)
    }
}
