//! The plan's arithmetic, without a GPU.

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

/// `tail_segment` replaces [`TAIL_SEGMENT`] on those levels (never above the segment); one
/// outside [`SEGMENTS`] is an error.
#[test]
fn a_tail_segment_takes_the_tail_levels_and_one_out_of_range_is_an_error() {
    let with_tail = |tail| MsmConfig {
        tail_segment: Some(tail),
        ..Default::default()
    };
    let default = MsmPlan::new(1 << 27, G1_INT64, 2 * GIB, &MsmConfig::default()).unwrap();
    for tail in [4, 16, 1024] {
        let plan = MsmPlan::new(1 << 27, G1_INT64, 2 * GIB, &with_tail(tail)).unwrap();
        let expected = plan.segment.min(tail);
        assert_eq!(
            plan.level_segments[1], default.level_segments[1],
            "{plan:?}"
        );
        assert_eq!(plan.level_segments[2], expected, "{plan:?}");
        assert!(
            *plan.level_bounds.last().unwrap() <= expected as u64,
            "{plan:?}"
        );
    }
    for tail in [0, 3, 1025] {
        let err = MsmPlan::new(1 << 12, G1_INT64, 2 * GIB, &with_tail(tail)).unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{tail}: {err}");
    }
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
                *plan.level_bounds.last().unwrap() <= *plan.level_segments.last().unwrap() as u64
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
                let per_group = (plan.layout.buckets(0) - 1).div_ceil(plan.window_groups(0)) as u64;
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

#[test]
fn a_bucket_cap_narrows_the_windows_and_holds() {
    let n = 1 << 27;
    let xyzz = G1_INT64.xyzz_bytes;
    let plan = |cap: Option<u64>| {
        let config = MsmConfig {
            max_chunk_points: Some(1 << 14),
            max_bucket_bytes: cap,
            ..Default::default()
        };
        MsmPlan::new(n, G1_INT64, 2 * GIB - 4, &config)
    };
    let own = plan(None).unwrap();
    let own_bytes = own.layout.total_buckets() * xyzz;
    assert!(
        own_bytes > GIB / 2,
        "the widest windows at 2^27: {own_bytes} bytes"
    );
    for cap in [own_bytes / 2, 64 << 20, 16 << 20] {
        let capped = plan(Some(cap)).unwrap();
        assert!(capped.layout.total_buckets() * xyzz <= cap, "{capped:?}");
        assert!(capped.layout.windows > own.layout.windows, "{capped:?}");
    }
    // What keeps an 8 GiB budget from one 2^27 proof: the workspace of the smallest chunk.
    assert!(own.workspace_bytes(xyzz) > GIB);
    assert!(plan(Some(64 << 20)).unwrap().workspace_bytes(xyzz) < 128 << 20);
    // Under the narrowest windows' buckets: the narrowest windows.
    let narrowest = plan(Some(1 << 10)).unwrap();
    assert_eq!(narrowest.layout, WindowLayout::mixed(*AUTO_WINDOWS.end()));
}

#[test]
fn workspaces_kept_for_a_proofs_chunked_msms_are_one() {
    let xyzz = G1_INT64.xyzz_bytes;
    let chunked = |n: usize| {
        let config = MsmConfig {
            max_chunk_points: Some(1_290_496),
            max_bucket_bytes: Some(528 << 20),
            ..MsmConfig::default()
        };
        MsmPlan::new(n, G1_INT64, 2 * GIB, &config).expect("plans")
    };
    // H, L, A and B G1 of a 2^27 proof: one shape, each fitting in the largest's workspace.
    let plans: Vec<MsmPlan> = [(1 << 27) - 1, 130_000_000, 90_000_000, 60_000_000]
        .into_iter()
        .map(chunked)
        .collect();
    let largest = plans[0].workspace_bytes(xyzz);
    assert_eq!(crate::msm::kept_bytes(&plans, xyzz), largest);

    // Plans of other shapes are kept side by side, two at most: the largest two.
    let whole = |n: usize| MsmPlan::new(n, G1_INT64, 2 * GIB, &MsmConfig::default()).unwrap();
    let apart = [whole(1 << 12), whole(1 << 16), whole(1 << 20)];
    for (i, a) in apart.iter().enumerate() {
        for b in &apart[i + 1..] {
            assert!(!a.fits_in(b) && !b.fits_in(a), "{a:?} {b:?}");
        }
    }
    let bytes: Vec<u64> = apart.iter().map(|p| p.workspace_bytes(xyzz)).collect();
    assert_eq!(crate::msm::kept_bytes(&apart, xyzz), bytes[1] + bytes[2]);
    assert_eq!(crate::msm::kept_bytes(&[], xyzz), 0);
}

/// msm.wgsl's level 0 sizes its segments by these: the shader's copies must agree.
#[test]
fn the_shader_knows_the_plans_level_constants() {
    let shader = include_str!("../../../shaders/msm.wgsl");
    for line in [
        format!("const FULL_LEVEL_THREADS: u32 = {FULL_LEVEL_THREADS}u;"),
        format!("const SHORTEST_SEGMENT: u32 = {}u;", SEGMENTS.start()),
    ] {
        assert!(shader.contains(&line), "msm.wgsl lacks {line:?}");
    }
}
