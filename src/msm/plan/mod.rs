//! How one MSM is cut up: window size, chunk size under the binding limit, accumulation levels,
//! reduction groups. Pure arithmetic, tested without a GPU.
//!
//! `windows` cuts scalars into windows; `costs` is what a curve's points cost.

mod costs;
mod windows;

pub use costs::{PointCosts, SEGMENTS};
pub use windows::{WindowLayout, AUTO_WINDOWS, MAX_WINDOW_BITS, WINDOW_COUNTS};

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
    /// Entries a thread takes on the accumulation levels past [`FULL_LEVEL_THREADS`]
    /// ([`SEGMENTS`], at most the segment). `None` takes [`TAIL_SEGMENT`].
    pub tail_segment: Option<u32>,
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
    /// while the scatter writes it, and add to the accumulation (measured slower overall:
    /// docs/benchmarks/gpu-part-2-27.md, commit 2c7e742).
    pub max_chunk_points: Option<usize>,
    /// Cap on the bytes of the bucket array: narrower windows (more additions a point) where
    /// the widest would not fit beside the rest of a small VRAM budget; under a cap no
    /// window count meets, the fewest buckets.
    pub max_bucket_bytes: Option<u64>,
    /// Time every GPU pass with timestamp queries (where the device has them); read the
    /// result with `MsmKernels::last_profile`.
    pub profile: bool,
}

/// Reduction threads on a GPU adapter: the fastest of 16384 to 262144 for G1, and faster
/// than 65536 for G2, on an H200 (docs/benchmarks/msm.md, commit 9685ae2).
pub const DEFAULT_REDUCTION_THREADS: u32 = 32768;

/// Chunks start on multiples of this many points, so every binding offset is aligned
/// (256 points of 32, 96 or 192 bytes are multiples of 256 bytes).
pub const CHUNK_ALIGN: u64 = 256;

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
    /// Entries a thread takes at each level: `segment` at level 0 (at most: over a list far
    /// below its bound, fewer, as msm.wgsl's `level_segment` says) and while a level's list
    /// fills [`FULL_LEVEL_THREADS`] threads, [`TAIL_SEGMENT`] after.
    pub level_segments: Vec<u32>,
}

/// Threads under which an accumulation level no longer fills a GPU: its time is then one
/// thread's chain of additions, `segment` long (64 for G1, 32 for G2), which shorter
/// segments on those levels cut (docs/benchmarks/gpu-part-2-27.md, commit 5af7eee).
pub const FULL_LEVEL_THREADS: u64 = 1 << 16;
/// Entries a thread takes on the levels past [`FULL_LEVEL_THREADS`]: each level shrinks its
/// list fourfold for 8 additions in a chain, 4 a halving, fewer than longer segments take.
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
        let tail_segment = match config.tail_segment {
            None => TAIL_SEGMENT,
            Some(t) if SEGMENTS.contains(&t) => t,
            Some(t) => {
                return Err(Error::InvalidInput(format!(
                    "a tail segment of {t} entries is outside {}..={}",
                    SEGMENTS.start(),
                    SEGMENTS.end()
                )))
            }
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
        let fitting: Vec<WindowLayout> = candidates
            .into_iter()
            .filter(|l| bucket_bytes(l) <= binding_limit)
            .collect();
        // The cheapest layout within the bucket cap; under a cap no layout meets, the one
        // with the fewest buckets (the cap saves what it can).
        let within_cap = |l: &&WindowLayout| {
            config
                .max_bucket_bytes
                .is_none_or(|cap| bucket_bytes(l) <= cap)
        };
        let layout = fitting
            .iter()
            .filter(within_cap)
            .min_by_key(|l| (cost(l), l.windows))
            .or_else(|| fitting.iter().min_by_key(|l| bucket_bytes(l)))
            .copied()
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
                segment.min(tail_segment)
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
        self.chunk as u64 * (2 * 32 + 4)
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
mod tests;
