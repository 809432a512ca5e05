//! How one MSM is cut up: window size, chunk size under the binding limit, accumulation levels,
//! reduction groups. Pure arithmetic, tested without a GPU.

use crate::error::{Error, Result};
use crate::gpu::MAX_LOOP_TRIPS;

/// Knobs of the MSM; the defaults suit real devices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MsmConfig {
    /// Cap on any one buffer binding, below the device's own limit. Tests lower it so the
    /// chunked path runs at small n on lavapipe.
    pub max_binding_bytes: Option<u64>,
    /// Sorted entries per accumulation thread ([`SEGMENTS`], and at most
    /// [`PointCosts::longest_segment`]): smaller means more parallel and more levels.
    /// `None` takes the curve's default (`GpuCurve::SEGMENT`).
    pub segment: Option<u32>,
    /// Force every window to this many bits (4..=[`MAX_WINDOW_BITS`]).
    pub window_bits: Option<u32>,
    /// Force this many windows ([`WINDOW_COUNTS`]), of mixed widths ([`WindowLayout::mixed`]).
    /// With neither, the count is picked from n.
    pub windows: Option<u32>,
    /// Threads (windows × groups) of the bucket reduction: many on a GPU, where the
    /// reduction is latency-bound; few on a CPU adapter, where every group's
    /// double-and-add is extra work. `None` picks by adapter type.
    pub reduction_threads: Option<u32>,
    /// Cap on the points of one chunk (rounded down to [`CHUNK_ALIGN`]), for measuring what
    /// chunks cost: smaller ones keep a window's part of the sorted list in the device's cache
    /// while the scatter writes it, and add to the accumulation (BENCHMARKS.md, "Session 21").
    pub max_chunk_points: Option<usize>,
    /// Time every GPU pass with timestamp queries (where the device has them); read the
    /// result with `MsmKernels::last_profile`.
    pub profile: bool,
}

/// Reduction threads on a GPU adapter. On the H200 (2^24 G1, 2^22 G2): 32768 gave 18.9 /
/// 10.1 ms against 20.2 / 13.9 ms with 65536; 16384 (G1) 25.9 ms, 131072 23.2 ms.
pub const DEFAULT_REDUCTION_THREADS: u32 = 32768;

/// Chunks start on multiples of this many points, so every binding offset is aligned
/// (256 points of 32, 96 or 192 bytes are multiples of 256 bytes).
pub const CHUNK_ALIGN: u64 = 256;

/// Widest window a caller may ask for.
pub const MAX_WINDOW_BITS: u32 = 22;
/// Window counts a caller may ask for: 12 windows are 21 and 22 bits wide, 64 are 4.
pub const WINDOW_COUNTS: std::ops::RangeInclusive<u32> = 12..=64;
/// Window counts chosen from n. Not 12: on the H200 at 2^26 and 2^27 the count, scan and
/// scatter over 16.8M keys a chunk cost what the accumulation of a window fewer saved
/// (BENCHMARKS.md, "Session 18").
pub const AUTO_WINDOWS: std::ops::RangeInclusive<u32> = 13..=64;

/// How the 256 bits of a signed-digit scalar are cut into windows: the first `wide` windows
/// are `bits + 1` wide, the rest `bits`. A window of width c holds digits of magnitude up to
/// 2^(c-1), so it has 2^(c-1) + 1 buckets (bucket 0 unused); widths summing to 256 or more
/// let the top window absorb the last carry (scalars are below 2^255).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowLayout {
    pub bits: u32,
    pub wide: u32,
    pub windows: u32,
}

impl WindowLayout {
    /// Every window `bits` wide, as many as cover 256 bits.
    pub const fn uniform(bits: u32) -> Self {
        WindowLayout {
            bits,
            wide: 0,
            windows: 256u32.div_ceil(bits),
        }
    }

    /// `windows` windows summing to exactly 256 bits, none more than a bit wider than
    /// another: the fewest buckets for that many windows (13 windows: 9 of 20 bits and 4 of
    /// 19, 5.8M buckets, where 13 of 20 bits have 6.8M).
    pub const fn mixed(windows: u32) -> Self {
        WindowLayout {
            bits: 256 / windows,
            wide: 256 % windows,
            windows,
        }
    }

    pub fn width(&self, window: u32) -> u32 {
        self.bits + u32::from(window < self.wide)
    }

    pub fn widest(&self) -> u32 {
        self.width(0)
    }

    /// Bit of the scalar where `window` starts.
    pub fn first_bit(&self, window: u32) -> u32 {
        window * self.bits + window.min(self.wide)
    }

    pub fn buckets(&self, window: u32) -> u32 {
        (1 << (self.width(window) - 1)) + 1
    }

    /// The key of `window`'s bucket 0: each window's buckets follow the one's below.
    pub fn first_key(&self, window: u32) -> u64 {
        (0..window).map(|w| self.buckets(w) as u64).sum()
    }

    /// Buckets of every window together (the key space of the sort).
    pub fn total_buckets(&self) -> u64 {
        self.first_key(self.windows)
    }
}

/// "13 × 20 bits", or "4 × 22 + 8 × 21 bits".
impl std::fmt::Display for WindowLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.wide > 0 {
            write!(f, "{} × {} + ", self.wide, self.bits + 1)?;
        }
        write!(f, "{} × {} bits", self.windows - self.wide, self.bits)
    }
}

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
    /// whose plans then need not pay for llvmpipe's cap (on the H200 the capped
    /// portable-path plans made a G1 2^24 MSM 2% slower, BENCHMARKS.md).
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
    fn iterations_under_cap(&self) -> u32 {
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
    fn most_buckets_per_group(&self, window_bits: u32) -> u32 {
        (self
            .iterations_under_cap()
            .saturating_sub(2 * window_bits + 2)
            / 2)
        .max(1)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MsmPlan {
    pub n: usize,
    pub layout: WindowLayout,
    pub segment: u32,
    /// Bucket groups of a `layout.bits`-wide window in the reduction; a wide window, with
    /// twice the buckets, has twice the groups ([`MsmPlan::window_groups`]).
    pub groups: u32,
    /// Points per chunk (a multiple of [`CHUNK_ALIGN`] unless it is all of n).
    pub chunk: usize,
    /// Upper bound on each accumulation level's list length; the last fits one segment.
    pub level_bounds: Vec<u64>,
    /// Entries a thread takes at each level: `segment` at level 0 and while a level's list
    /// fills [`FULL_LEVEL_THREADS`] threads, [`TAIL_SEGMENT`] after.
    pub level_segments: Vec<u32>,
}

/// Threads under which an accumulation level no longer fills a GPU: its time is then one
/// thread's chain of additions, `segment` long (64 for G1, 32 for G2). With 8 entries a
/// thread on those levels the H200's G1 accumulation took 1.9 ms less at 2^24 and 18 ms less
/// at 2^27 (7 chunks), G2's at 2^22 2.3 ms less (BENCHMARKS.md, "Session 22").
pub const FULL_LEVEL_THREADS: u64 = 1 << 16;
/// Entries a thread takes on the levels past [`FULL_LEVEL_THREADS`]: each level shrinks its
/// list fourfold for 8 additions in a chain (4 a halving, where 64 entries took 12.8 and 32
/// took 8).
pub const TAIL_SEGMENT: u32 = 8;

/// Points per chunk that fit `limit` bytes in every per-chunk buffer: scalars (32 bytes a
/// point), bases, sorted entries (8 bytes per window) and the level-1 partials (two slots of
/// `xyzz` bytes per segment of entries, so a fraction of a slot per point).
fn points_fitting(limit: u64, windows: u32, segment: u32, affine: u64, xyzz: u64) -> u64 {
    let linear = [32, affine, 8 * windows as u64]
        .into_iter()
        .map(|per_point| limit / per_point)
        .min()
        .unwrap_or(0);
    // 2 * ceil(points * windows / segment) slots must fit: a whole segment per slot pair.
    let segments = (limit / xyzz) / 2;
    let partials = segments.saturating_mul(segment as u64) / windows as u64;
    linear.min(partials)
}

/// Bytes of the largest per-chunk buffer for a chunk of `points` (the buffers of
/// [`points_fitting`]).
fn widest_buffer(points: u64, windows: u32, segment: u32, affine: u64, xyzz: u64) -> u64 {
    let partials = 2 * (points * windows as u64).div_ceil(segment as u64) * xyzz;
    [32, affine, 8 * windows as u64]
        .into_iter()
        .map(|per_point| points * per_point)
        .chain([partials])
        .max()
        .unwrap_or(0)
}

impl MsmPlan {
    /// Plans an MSM of `n` points of `points`' sizes and costs, within `binding_limit` bytes
    /// per buffer binding, every thread's loops under `points.loop_cap`.
    pub fn new(
        n: usize,
        points: PointCosts,
        binding_limit: u64,
        config: &MsmConfig,
    ) -> Result<Self> {
        let PointCosts {
            affine_bytes,
            xyzz_bytes,
            ..
        } = points;
        let longest_segment = points.longest_segment();
        let mut segment = match config.segment {
            None => 32.min(longest_segment),
            Some(t) if !SEGMENTS.contains(&t) => {
                return Err(Error::InvalidInput(format!(
                    "an accumulation segment of {t} entries is outside {}..={}",
                    SEGMENTS.start(),
                    SEGMENTS.end()
                )))
            }
            Some(t) if t > longest_segment => {
                return Err(Error::InvalidInput(format!(
                    "an accumulation segment of {t} entries is over {longest_segment}, the \
                     longest whose loop stays under {MAX_LOOP_TRIPS} trips on this path \
                     (llvmpipe stops longer ones)"
                )))
            }
            Some(t) => t,
        };
        let candidates: Vec<WindowLayout> = match (config.window_bits, config.windows) {
            (Some(_), Some(_)) => {
                return Err(Error::InvalidInput(
                    "give the window size or the window count, not both".into(),
                ))
            }
            (Some(c), None) if (4..=MAX_WINDOW_BITS).contains(&c) => {
                vec![WindowLayout::uniform(c)]
            }
            (Some(c), None) => {
                return Err(Error::InvalidInput(format!(
                    "window size {c} bits is outside 4..={MAX_WINDOW_BITS}"
                )))
            }
            (None, Some(w)) if WINDOW_COUNTS.contains(&w) => vec![WindowLayout::mixed(w)],
            (None, Some(w)) => {
                return Err(Error::InvalidInput(format!(
                    "{w} windows is outside {}..={}",
                    WINDOW_COUNTS.start(),
                    WINDOW_COUNTS.end()
                )))
            }
            (None, None) => AUTO_WINDOWS.rev().map(WindowLayout::mixed).collect(),
        };
        // Accumulation adds every (point, window) once; the reduction costs a few such
        // additions per bucket (`PointCosts::bucket_cost`).
        let cost =
            |l: &WindowLayout| l.windows as u64 * n as u64 + points.bucket_cost * l.total_buckets();
        let bucket_bytes = |l: &WindowLayout| l.total_buckets() * xyzz_bytes;
        let fewest_buckets = candidates[0];
        let layout = candidates
            .into_iter()
            .filter(|l| bucket_bytes(l) <= binding_limit)
            .min_by_key(|l| (cost(l), l.windows))
            .ok_or(Error::TooLarge {
                what: "the MSM bucket array at the narrowest windows allowed",
                needed: bucket_bytes(&fewest_buckets),
                limit: binding_limit,
            })?;
        let windows = layout.windows;

        // The partial sums shrink as segments grow: under a tight limit, grow the segment
        // until a chunk of 256 points fits.
        let fitting =
            |segment| points_fitting(binding_limit, windows, segment, affine_bytes, xyzz_bytes);
        while fitting(segment) < CHUNK_ALIGN.min(n as u64) && 2 * segment <= longest_segment {
            segment *= 2;
        }
        let fit = match config.max_chunk_points {
            Some(cap) => fitting(segment).min((cap as u64).max(CHUNK_ALIGN)),
            None => fitting(segment),
        };
        let chunk = if fit >= n as u64 {
            n
        } else if fit >= CHUNK_ALIGN {
            (fit - fit % CHUNK_ALIGN) as usize
        } else {
            return Err(Error::TooLarge {
                what: "an MSM chunk of 256 points",
                needed: widest_buffer(CHUNK_ALIGN, windows, segment, affine_bytes, xyzz_bytes),
                limit: binding_limit,
            });
        };

        // Groups of a narrow window (a wide one has twice the buckets and twice the groups);
        // every group's loop also doubles up to the widest window's bits.
        let buckets_in_groups = layout.buckets(windows - 1) - 1;
        let min_groups = buckets_in_groups
            .div_ceil(points.most_buckets_per_group(layout.widest()))
            .max(1);
        let groups = (config
            .reduction_threads
            .unwrap_or(DEFAULT_REDUCTION_THREADS)
            / (windows + layout.wide))
            .clamp(min_groups, buckets_in_groups.max(1))
            .max(1);

        let mut level_bounds = vec![chunk as u64 * windows as u64];
        let mut level_segments = vec![segment];
        loop {
            let last = *level_bounds.last().expect("never empty");
            let t = *level_segments.last().expect("never empty");
            if last <= t as u64 {
                break;
            }
            let next = 2 * last.div_ceil(t as u64);
            level_bounds.push(next);
            level_segments.push(if next.div_ceil(segment as u64) >= FULL_LEVEL_THREADS {
                segment
            } else {
                segment.min(TAIL_SEGMENT)
            });
        }
        Ok(MsmPlan {
            n,
            layout,
            segment,
            groups,
            chunk: chunk.max(1),
            level_bounds,
            level_segments,
        })
    }

    /// Entries the sorted list of one chunk can hold.
    pub fn max_entries(&self) -> u64 {
        self.chunk as u64 * self.layout.windows as u64
    }

    /// Length of the largest partial list (level 1).
    pub fn max_partials(&self) -> u64 {
        self.level_bounds.get(1).copied().unwrap_or(2)
    }

    /// Reduction groups of `window`.
    pub fn window_groups(&self, window: u32) -> u32 {
        self.groups << u32::from(window < self.layout.wide)
    }

    /// Where `window`'s group sums start among all windows'.
    pub fn first_group(&self, window: u32) -> u32 {
        (window + window.min(self.layout.wide)) * self.groups
    }

    /// Reduction threads: every window's groups.
    pub fn total_groups(&self) -> u32 {
        self.first_group(self.layout.windows)
    }

    /// Strides of the pairwise tree over each window's group sums.
    pub fn tree_strides(&self) -> Vec<u32> {
        let mut strides = Vec::new();
        let mut stride = 1;
        while stride < self.window_groups(0) {
            strides.push(stride);
            stride *= 2;
        }
        strides
    }

    /// Device bytes of the workspace this plan allocates (for messages; approximate).
    pub fn workspace_bytes(&self, xyzz: u64) -> u64 {
        let buckets = self.layout.total_buckets() * xyzz;
        self.chunk as u64 * (32 + 4)
            + 2 * self.count_slots() * 4
            + self.max_entries() * 8
            + 2 * self.max_partials() * (4 + xyzz)
            + buckets
            + self.total_groups() as u64 * xyzz
    }

    /// Whether a workspace made for `other` can run this plan: the same windows, buckets,
    /// segments and groups, and room for this plan's chunk and every accumulation level.
    pub fn fits_in(&self, other: &MsmPlan) -> bool {
        let same_shape =
            (self.layout, self.segment, self.groups) == (other.layout, other.segment, other.groups);
        let levels_fit = self.level_bounds.len() <= other.level_bounds.len()
            && self
                .level_bounds
                .iter()
                .zip(&other.level_bounds)
                .all(|(mine, theirs)| mine <= theirs);
        same_shape
            && self.chunk <= other.chunk
            && self.max_partials() <= other.max_partials()
            && levels_fit
    }

    /// All (window, bucket) keys plus the total slot the scan fills.
    pub fn count_slots(&self) -> u64 {
        self.layout.total_buckets() + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;
    const G1_INT64: PointCosts = PointCosts::new(96, 192, 0);

    /// Every curve on every path: G1 and G2, straight-line and rolled multiplications.
    fn every_point_costs() -> Vec<PointCosts> {
        use crate::field::GpuField;
        use crate::gpu::WideMul;
        use blstrs::{Fp, Fp2};
        WideMul::ALL
            .into_iter()
            .flat_map(|wide| {
                [
                    PointCosts::new(96, 192, Fp::mul_loop_trips(wide)),
                    PointCosts::new(192, 384, Fp2::mul_loop_trips(wide)),
                ]
            })
            .collect()
    }

    #[test]
    fn a_plan_fits_the_workspace_of_a_larger_one_of_the_same_shape() {
        let plan = |n: usize, limit: u64| {
            MsmPlan::new(n, G1_INT64, limit, &MsmConfig::default()).expect("plans")
        };
        let big = plan(1 << 20, 2 * GIB);
        assert!(big.fits_in(&big));
        assert!(plan((1 << 20) - 5, 2 * GIB).fits_in(&big));
        assert!(
            !big.fits_in(&plan((1 << 20) - 5, 2 * GIB)),
            "a smaller chunk"
        );
        assert!(!plan(1 << 12, 2 * GIB).fits_in(&big), "another window size");
        // Chunks share one bucket array: a chunked plan runs in the workspace of one chunk.
        let chunked = plan(1 << 20, 64 << 20);
        assert!(chunked.chunk < chunked.n);
        let unchunked_same_shape = MsmPlan {
            n: chunked.chunk,
            ..chunked.clone()
        };
        assert!(chunked.fits_in(&unchunked_same_shape));
        assert!(unchunked_same_shape.fits_in(&chunked));
    }

    #[test]
    fn windows_cover_256_bits_so_signed_digits_never_carry_out() {
        for log_n in [0, 4, 10, 16, 20, 24, 27] {
            let plan = MsmPlan::new(1 << log_n, G1_INT64, 4 * GIB, &MsmConfig::default()).unwrap();
            let layout = plan.layout;
            let top = layout.windows - 1;
            assert!(layout.first_bit(top) + layout.width(top) >= 256, "{plan:?}");
            assert!(layout.widest() <= MAX_WINDOW_BITS, "{plan:?}");
        }
        for windows in WINDOW_COUNTS {
            let layout = WindowLayout::mixed(windows);
            assert_eq!(
                layout.first_bit(windows - 1) + layout.width(windows - 1),
                256
            );
            assert!(layout.widest() <= MAX_WINDOW_BITS, "{layout:?}");
        }
        for bits in 4..=MAX_WINDOW_BITS {
            let layout = WindowLayout::uniform(bits);
            assert!(layout.windows * bits >= 256 && (layout.windows - 1) * bits < 256);
        }
    }

    /// Windows laid end to end: each starts where the one below ends, and the keys of the
    /// sort are every window's buckets one after another. msm.wgsl computes a window's first
    /// key and first reduction group in closed form (`window_first_key`,
    /// `window_first_group`): they must match the sums here.
    #[test]
    fn mixed_windows_tile_the_scalar_and_the_key_space() {
        let layout = WindowLayout::mixed(12);
        assert_eq!((layout.bits, layout.wide), (21, 4));
        assert_eq!(
            layout.total_buckets(),
            4 * ((1 << 21) + 1) + 8 * ((1 << 20) + 1)
        );
        for windows in WINDOW_COUNTS {
            let layout = WindowLayout::mixed(windows);
            let narrow = (1u64 << (layout.bits - 1)) + 1;
            let plan = MsmPlan::new(
                1 << 16,
                G1_INT64,
                4 * GIB,
                &MsmConfig {
                    windows: Some(windows),
                    ..Default::default()
                },
            )
            .unwrap();
            for w in 1..windows {
                assert_eq!(
                    layout.first_bit(w),
                    layout.first_bit(w - 1) + layout.width(w - 1)
                );
                let shader_first_key = w as u64 * narrow + w.min(layout.wide) as u64 * (narrow - 1);
                assert_eq!(
                    layout.first_key(w),
                    shader_first_key,
                    "{layout:?} window {w}"
                );
                let groups: u32 = (0..w).map(|v| plan.window_groups(v)).sum();
                assert_eq!(plan.first_group(w), groups, "{plan:?} window {w}");
            }
        }
    }

    /// From 2^24 points on, G1 takes 13 windows of 19 and 20 bits (5.8M buckets, where 13
    /// of 20 bits have 6.8M); twelve only when asked for, and only where a binding holds
    /// their 3.2 GB of buckets.
    #[test]
    fn large_inputs_take_thirteen_windows_of_mixed_widths() {
        let limit = 2 * GIB - 4;
        let plan = |n: usize, config: &MsmConfig| MsmPlan::new(n, G1_INT64, limit, config);
        for log_n in [24, 27] {
            let layout = plan(1 << log_n, &MsmConfig::default()).unwrap().layout;
            assert_eq!(layout, WindowLayout::mixed(13));
            assert_eq!((layout.bits, layout.wide), (19, 9));
        }
        let twelve = MsmConfig {
            windows: Some(12),
            ..Default::default()
        };
        let err = plan(1 << 27, &twelve).unwrap_err();
        assert!(matches!(err, Error::TooLarge { .. }), "{err}");
        let roomy = MsmPlan::new(1 << 27, G1_INT64, 4 * GIB, &twelve).unwrap();
        assert_eq!(
            roomy.layout.total_buckets(),
            4 * ((1 << 21) + 1) + 8 * ((1 << 20) + 1)
        );
    }

    #[test]
    fn larger_inputs_get_wider_windows() {
        let c = |n| {
            MsmPlan::new(n, G1_INT64, 2 * GIB, &MsmConfig::default())
                .unwrap()
                .layout
                .widest()
        };
        assert!(c(1 << 10) < c(1 << 16) && c(1 << 16) <= c(1 << 22));
    }

    #[test]
    fn a_small_binding_limit_gives_aligned_chunks_that_fit() {
        let config = MsmConfig::default();
        let limit = 256 * 1024;
        let plan = MsmPlan::new(10_000, G1_INT64, limit, &config).unwrap();
        assert!(
            plan.chunk < 10_000 && (plan.chunk as u64).is_multiple_of(CHUNK_ALIGN),
            "{plan:?}"
        );
        assert!(plan.max_entries() * 8 <= limit);
        assert!(plan.max_partials() * 192 <= limit);
        assert!(plan.layout.total_buckets() * 192 <= limit);
    }

    #[test]
    fn accumulation_levels_end_in_one_segment() {
        let plan = MsmPlan::new(1 << 20, G1_INT64, 2 * GIB, &MsmConfig::default()).unwrap();
        assert!(*plan.level_bounds.last().unwrap() <= *plan.level_segments.last().unwrap() as u64);
        assert!(plan.level_bounds.windows(2).all(|w| w[1] < w[0]));
    }

    #[test]
    fn a_chunk_cap_is_kept_and_rounded_down_to_the_alignment() {
        for (cap, expected) in [(1000, 768), (1, 256), (1 << 20, 1 << 20)] {
            let config = MsmConfig {
                max_chunk_points: Some(cap),
                ..Default::default()
            };
            let plan = MsmPlan::new(1 << 22, G1_INT64, 2 * GIB, &config).unwrap();
            assert_eq!(plan.chunk, expected, "cap {cap}");
        }
    }

    /// Level 0 and the levels that fill a GPU take the plan's segment; the rest, chains of
    /// additions on few threads, take the tail's.
    #[test]
    fn levels_past_a_full_gpu_take_the_tail_segment() {
        for n in [1 << 12, 1 << 20, 1 << 24, 1 << 27] {
            let plan = MsmPlan::new(n, G1_INT64, 2 * GIB, &MsmConfig::default()).unwrap();
            assert_eq!(plan.level_segments[0], plan.segment);
            for (&bound, &t) in plan.level_bounds.iter().zip(&plan.level_segments).skip(1) {
                let fills = bound.div_ceil(plan.segment as u64) >= FULL_LEVEL_THREADS;
                let expected = if fills {
                    plan.segment
                } else {
                    plan.segment.min(TAIL_SEGMENT)
                };
                assert_eq!(t, expected, "2^{}: {plan:?}", n.trailing_zeros());
            }
        }
        // A chunk of 2^27 points: level 1 (millions of partials) fills the GPU, level 2 not.
        let plan = MsmPlan::new(1 << 27, G1_INT64, 2 * GIB, &MsmConfig::default()).unwrap();
        let t = plan.segment;
        assert_eq!(&plan.level_segments[..3], &[t, t, TAIL_SEGMENT], "{plan:?}");
    }

    #[test]
    fn every_segment_allowed_ends_its_levels_and_smaller_ones_are_errors() {
        for segment in [2, 3, 1025] {
            let config = MsmConfig {
                segment: Some(segment),
                ..Default::default()
            };
            let err = MsmPlan::new(1 << 12, G1_INT64, 2 * GIB, &config).unwrap_err();
            assert!(matches!(err, Error::InvalidInput(_)), "{segment}: {err}");
        }
        for segment in [4, 5, 7, 64, 1024] {
            let config = MsmConfig {
                segment: Some(segment),
                ..Default::default()
            };
            for n in [1, 5, 1000, 1 << 14] {
                let plan = MsmPlan::new(n, G1_INT64, 2 * GIB, &config).unwrap();
                assert!(
                    *plan.level_bounds.last().unwrap()
                        <= *plan.level_segments.last().unwrap() as u64
                );
                assert_eq!(plan.level_segments.len(), plan.level_bounds.len());
                assert_eq!(plan.level_segments[0], segment);
                assert!(
                    plan.level_bounds.windows(2).all(|w| w[1] < w[0]),
                    "{plan:?}"
                );
            }
        }
    }

    /// Every thread's loop trips, as the kernels make them, under llvmpipe's cap: the
    /// longest reduction group (two iterations a bucket, two a bit of its offset, the switch
    /// and the exit) and the longest segment, with the fewest threads and the default.
    #[test]
    fn every_loop_stays_under_llvmpipes_cap() {
        for points in every_point_costs() {
            let iteration = 1 + points.addition_loop_trips as u64;
            let uniform = (4..=MAX_WINDOW_BITS).map(|c| (Some(c), None));
            let mixed = WINDOW_COUNTS.map(|w| (None, Some(w)));
            for (window_bits, windows) in uniform.chain(mixed) {
                for reduction_threads in [Some(1), None] {
                    let config = MsmConfig {
                        window_bits,
                        windows,
                        reduction_threads,
                        ..Default::default()
                    };
                    let plan = MsmPlan::new(1 << 12, points, 16 * GIB, &config).unwrap();
                    let per_group =
                        (plan.layout.buckets(0) - 1).div_ceil(plan.window_groups(0)) as u64;
                    let c = plan.layout.widest() as u64;
                    let reduction = (2 * per_group + 2 * c + 2) * iteration;
                    let accumulation = (plan.segment as u64 + 2) * iteration;
                    assert!(
                        reduction.max(accumulation) <= MAX_LOOP_TRIPS as u64,
                        "{points:?} {plan:?}"
                    );
                }
            }
            let longest = points.longest_segment();
            let config = |segment| MsmConfig {
                segment: Some(segment),
                ..Default::default()
            };
            assert!(MsmPlan::new(1 << 12, points, 8 * GIB, &config(longest)).is_ok());
            if longest < *SEGMENTS.end() {
                let err = MsmPlan::new(1 << 12, points, 8 * GIB, &config(longest + 1));
                assert!(
                    matches!(err, Err(Error::InvalidInput(ref m)) if m.contains("65535")),
                    "{points:?}: {err:?}"
                );
            }
        }
    }

    /// Without the cap, the reduction's groups follow the threads asked for alone, and
    /// segments may be as long as [`SEGMENTS`] allows.
    #[test]
    fn uncapped_plans_group_buckets_by_threads_alone() {
        for points in every_point_costs() {
            let uncapped = points.with_loop_cap(None);
            assert_eq!(uncapped.longest_segment(), *SEGMENTS.end());
            let config = MsmConfig {
                window_bits: Some(20),
                ..Default::default()
            };
            let capped = MsmPlan::new(1 << 24, points, 16 * GIB, &config).unwrap();
            let plan = MsmPlan::new(1 << 24, uncapped, 16 * GIB, &config).unwrap();
            assert_eq!(
                plan.groups,
                DEFAULT_REDUCTION_THREADS / plan.layout.windows,
                "{points:?}"
            );
            assert!(plan.groups <= capped.groups, "{points:?}");
        }
        // The portable G1 path is where the cap binds at 2^24 (3943 groups a window capped).
        let portable = every_point_costs()[0];
        let config = MsmConfig {
            window_bits: Some(20),
            ..Default::default()
        };
        let capped = MsmPlan::new(1 << 24, portable, 16 * GIB, &config).unwrap();
        assert!(capped.groups > DEFAULT_REDUCTION_THREADS / capped.layout.windows);
    }

    #[test]
    fn a_tight_limit_widens_small_segments_instead_of_failing() {
        let config = MsmConfig {
            segment: Some(8),
            ..Default::default()
        };
        let plan = MsmPlan::new(700, PointCosts::new(192, 384, 0), 512 * 1024, &config).unwrap();
        assert!(plan.segment > 8 && plan.chunk >= 256, "{plan:?}");
        assert!(plan.max_partials() * 384 <= 512 * 1024);
    }

    #[test]
    fn a_limit_too_small_for_one_chunk_is_an_error() {
        let err = MsmPlan::new(1000, G1_INT64, 4096, &MsmConfig::default()).unwrap_err();
        assert!(matches!(err, Error::TooLarge { .. }), "{err}");
        assert!(
            matches!(err, Error::TooLarge { needed, limit, .. } if needed > limit),
            "{err}"
        );
    }
}
