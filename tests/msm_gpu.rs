//! GPU MSM equals blstrs' multi_exp on G1 and G2, on both wide-multiply paths, for the inputs
//! that break bucket methods: tiny n, zero/one/r-1 scalars, one hot bucket, repeated bases,
//! the identity among bases, Filecoin-like 0/1-heavy witnesses, and the chunked path.

mod common;

use blstrs::Scalar;
use common::msm_kernels;
use ff::Field;
use group::prime::PrimeCurveAffine;
use group::Curve;
use wgpu_groth16::curve::{sample_bases, GpuCurve, G1, G2};
use wgpu_groth16::field::samples::{sample_scalars, ScalarMix};
use wgpu_groth16::gpu::WideMul;
use wgpu_groth16::msm::{
    msm_cpu, MsmBases, MsmConfig, MsmJob, MsmKernels, MsmLimits, Scalars, CHUNK_ALIGN,
};

fn bases<C: GpuCurve>(seed: u64, n: usize) -> Vec<C::Affine> {
    sample_bases::<C>(seed, n)
}

fn random_scalars(seed: u64, n: usize) -> Vec<Scalar> {
    sample_scalars(seed, n, ScalarMix::Uniform)
}

/// 90% zeros and ones, the rest full-width: the shape of a Filecoin witness.
fn filecoin_like_scalars(seed: u64, n: usize) -> Vec<Scalar> {
    sample_scalars(seed, n, ScalarMix::Skewed)
}

fn assert_msm<C: GpuCurve>(
    kernels: &MsmKernels<C>,
    bases: &[C::Affine],
    scalars: &[Scalar],
    what: &str,
) {
    let gpu = kernels.msm_once(bases, scalars).expect("GPU MSM runs");
    let cpu = msm_cpu::<C>(bases, scalars).unwrap();
    assert_eq!(
        gpu,
        cpu,
        "{} {what} (n = {}, {} path)",
        C::NAME,
        scalars.len(),
        kernels.wide_mul()
    );
}

fn sizes_equal_blstrs<C: GpuCurve>(wide: WideMul, sizes: &[usize]) {
    let Some(kernels) = msm_kernels::<C>(wide) else {
        return;
    };
    let largest = *sizes.iter().max().unwrap();
    let b = bases::<C>(1, largest);
    let s = random_scalars(2, largest);
    for &n in sizes {
        assert_msm(kernels, &b[..n], &s[..n], "random scalars");
    }
}

fn special_scalars_equal_blstrs<C: GpuCurve>(wide: WideMul, n: usize) {
    let Some(kernels) = msm_kernels::<C>(wide) else {
        return;
    };
    let b = bases::<C>(3, n);
    let minus_one = -Scalar::ONE;
    let cases: Vec<(&str, Vec<Scalar>)> = vec![
        ("all-zero scalars", vec![Scalar::ZERO; n]),
        ("all-one scalars", vec![Scalar::ONE; n]),
        ("all r-1 scalars", vec![minus_one; n]),
        (
            "one random scalar for every point (one hot bucket per window)",
            vec![random_scalars(4, 1)[0]; n],
        ),
        (
            "small scalars 0..n",
            (0..n as u64).map(Scalar::from).collect(),
        ),
        (
            "Filecoin-like 0/1-heavy witness",
            filecoin_like_scalars(5, n),
        ),
        (
            "the real PoRep partition's mix: 1.6% full width",
            sample_scalars(15, n, ScalarMix::Porep),
        ),
        (
            // Key 1 (window 0, digit ±1) is counted and placed a workgroup at a time: ones
            // and minus ones of the same workgroups, between other scalars.
            "1, -1, random and 0 in turn",
            random_scalars(6, n)
                .into_iter()
                .enumerate()
                .map(|(i, s)| [Scalar::ONE, minus_one, s, Scalar::ZERO][i % 4])
                .collect(),
        ),
    ];
    for (what, scalars) in cases {
        assert_msm(kernels, &b, &scalars, what);
    }
}

fn degenerate_bases_equal_blstrs<C: GpuCurve>(wide: WideMul, n: usize) {
    let Some(kernels) = msm_kernels::<C>(wide) else {
        return;
    };
    let mut b = bases::<C>(6, n);
    let s = random_scalars(7, n);
    // Repeated bases: equal points meet in buckets and must double, not cancel.
    let repeated = vec![b[0]; n];
    assert_msm(
        kernels,
        &repeated,
        &vec![Scalar::ONE; n],
        "one base repeated, scalar one",
    );
    assert_msm(kernels, &repeated, &s, "one base repeated, random scalars");
    // A base and its negation with equal scalars cancel in a bucket.
    let mut pairs = b.clone();
    for i in (1..n).step_by(2) {
        pairs[i] = (-pairs[i - 1].to_curve()).to_affine();
    }
    assert_msm(
        kernels,
        &pairs,
        &vec![Scalar::from(5u64); n],
        "bases cancelling in pairs",
    );
    // The identity among the bases.
    for i in (0..n).step_by(7) {
        b[i] = C::Affine::identity();
    }
    assert_msm(kernels, &b, &s, "identity among bases");
}

fn chunked_path_equals_blstrs<C: GpuCurve>(wide: WideMul, n: usize, limit: u64) {
    let Some(kernels) = msm_kernels::<C>(wide) else {
        return;
    };
    // The default segment, and an odd one: a segment's two partial slots then straddle the
    // next level's segment edges.
    for segment in [None, Some(5)] {
        let config = MsmConfig {
            max_binding_bytes: Some(limit),
            segment,
            ..Default::default()
        };
        let chunked = kernels.with_config(config);
        let plan = chunked.plan(n).unwrap();
        assert!(
            2 * plan.chunk < n,
            "the limit should force three chunks or more: {plan:?}"
        );
        let b = bases::<C>(8, n);
        // Several base buffers too: resident bases split at the limit.
        let resident = chunked.upload_bases(&b).unwrap();
        // The second chunk undoes the first (negated bases, the same scalars): every bucket
        // the first chunk fills sums to the identity after the second.
        let mut cancelling = b.clone();
        let mut repeated = random_scalars(11, n);
        for i in plan.chunk..2 * plan.chunk {
            cancelling[i] = (-b[i - plan.chunk].to_curve()).to_affine();
            repeated[i] = repeated[i - plan.chunk];
        }
        let resident_cancelling = chunked.upload_bases(&cancelling).unwrap();
        let cases = [
            ("random", &b, &resident, random_scalars(9, n)),
            ("Filecoin-like", &b, &resident, filecoin_like_scalars(10, n)),
            (
                "second chunk cancelling the first",
                &cancelling,
                &resident_cancelling,
                repeated,
            ),
        ];
        for (what, bases, resident, s) in cases {
            let gpu = chunked.msm(resident, &s).unwrap();
            assert_eq!(
                gpu,
                msm_cpu::<C>(bases, &s).unwrap(),
                "{} chunked, {what}, segment {}",
                C::NAME,
                plan.segment
            );
        }
    }
}

/// Bases partly resident (none, a prefix, all) and the rest streamed from the host in chunks
/// of 256 points through two buffers, with the MSM's own windows and with its bucket array
/// capped at half of theirs (narrower windows, as a small VRAM budget plans): the sum of a
/// resident MSM, with the scalars on the host and on the device.
fn streamed_bases_equal_blstrs<C: GpuCurve>(wide: WideMul, n: usize) {
    let (Some(kernels), Some(ntt)) = (msm_kernels::<C>(wide), common::ntt_kernels(wide)) else {
        return;
    };
    let b = bases::<C>(12, n);
    let s = filecoin_like_scalars(13, n);
    let expected = msm_cpu::<C>(&b, &s).unwrap();
    let on_device = ntt
        .upload(&s, n.next_power_of_two().trailing_zeros())
        .unwrap();
    let chunks = MsmLimits::chunks_of(256);
    let own = kernels.plan_within(n, chunks).unwrap().layout;
    let capped = MsmLimits {
        bucket_bytes: own.total_buckets() * C::XYZZ_BYTES as u64 / 2,
        ..chunks
    };
    let narrower = kernels.plan_within(n, capped).unwrap().layout;
    assert!(
        narrower.windows > own.windows,
        "{narrower:?} against {own:?}"
    );
    for prefix in [0, CHUNK_ALIGN as usize, 3 * CHUNK_ALIGN as usize, n] {
        let resident = (prefix > 0).then(|| kernels.upload_bases(&b[..prefix]).unwrap());
        let bases = MsmBases {
            resident: resident.as_ref(),
            host: &b,
        };
        for scalars in [Scalars::Host(&s), Scalars::Device(&on_device, n)] {
            for limits in [chunks, capped] {
                let sum = kernels.msm_streaming(&bases, scalars, limits).unwrap();
                assert_eq!(
                    sum,
                    expected,
                    "{} {prefix} resident of {n}, {limits:?}",
                    C::NAME
                );
            }
        }
    }
}

/// Five MSMs run together in chunks of 256 points: three over the same bases (the first
/// shorter than the others, so the longest chunk of a round is the one uploaded; one with its
/// scalars on the device), one over other bases, one empty; the bases all streamed, then
/// with a resident prefix: each sum blstrs'.
fn msms_together_equal_blstrs<C: GpuCurve>(wide: WideMul, n: usize) {
    let (Some(kernels), Some(ntt)) = (msm_kernels::<C>(wide), common::ntt_kernels(wide)) else {
        return;
    };
    let b = bases::<C>(14, n);
    let other = bases::<C>(15, n / 2 + 100);
    let shorter = random_scalars(16, n - 300);
    let skewed = filecoin_like_scalars(17, n);
    let uniform = random_scalars(18, n);
    let other_scalars = random_scalars(19, other.len());
    let on_device = ntt
        .upload(&uniform, n.next_power_of_two().trailing_zeros())
        .unwrap();
    let expected = [
        msm_cpu::<C>(&b, &shorter).unwrap(),
        msm_cpu::<C>(&other, &other_scalars).unwrap(),
        msm_cpu::<C>(&b, &skewed).unwrap(),
        msm_cpu::<C>(&b, &uniform).unwrap(),
        msm_cpu::<C>(&b, &[]).unwrap(),
    ];
    for prefix in [0, 2 * CHUNK_ALIGN as usize] {
        let resident = (prefix > 0).then(|| kernels.upload_bases(&b[..prefix]).unwrap());
        let shared = MsmBases {
            resident: resident.as_ref(),
            host: &b,
        };
        let others = MsmBases {
            resident: None,
            host: &other,
        };
        let job = |bases, scalars| MsmJob { bases, scalars };
        let jobs = [
            job(shared, Scalars::Host(&shorter)),
            job(others, Scalars::Host(&other_scalars)),
            job(shared, Scalars::Host(&skewed)),
            job(shared, Scalars::Device(&on_device, n)),
            job(shared, Scalars::Host(&[])),
        ];
        let sums = kernels
            .msm_together(&jobs, MsmLimits::chunks_of(256))
            .unwrap();
        assert_eq!(sums, expected, "{} {prefix} resident of {n}", C::NAME);
    }
}

#[test]
fn msms_g1_together_equal_blstrs() {
    msms_together_equal_blstrs::<G1>(WideMul::Int64, 1000);
}

#[test]
fn msms_g2_together_equal_blstrs() {
    msms_together_equal_blstrs::<G2>(WideMul::Portable, 900);
}

#[test]
fn msm_g1_with_streamed_bases_equals_blstrs() {
    streamed_bases_equal_blstrs::<G1>(WideMul::Int64, 1000);
}

#[test]
fn msm_g2_with_streamed_bases_equals_blstrs() {
    streamed_bases_equal_blstrs::<G2>(WideMul::Portable, 900);
}

#[test]
fn msm_g1_equals_blstrs_for_sizes_up_to_4096_portable() {
    sizes_equal_blstrs::<G1>(WideMul::Portable, &[0, 1, 2, 3, 5, 64, 100, 1000, 4096]);
}

#[test]
fn msm_g1_equals_blstrs_for_sizes_up_to_4096_int64() {
    sizes_equal_blstrs::<G1>(WideMul::Int64, &[0, 1, 2, 3, 5, 64, 100, 1000, 4096]);
}

#[test]
fn msm_g1_equals_blstrs_for_special_scalars_portable() {
    special_scalars_equal_blstrs::<G1>(WideMul::Portable, 700);
}

#[test]
fn msm_g1_equals_blstrs_for_special_scalars_int64() {
    special_scalars_equal_blstrs::<G1>(WideMul::Int64, 700);
}

#[test]
fn msm_g1_equals_blstrs_for_degenerate_bases_portable() {
    degenerate_bases_equal_blstrs::<G1>(WideMul::Portable, 300);
}

#[test]
fn msm_g1_equals_blstrs_for_degenerate_bases_int64() {
    degenerate_bases_equal_blstrs::<G1>(WideMul::Int64, 300);
}

#[test]
fn msm_g1_chunked_path_equals_blstrs() {
    chunked_path_equals_blstrs::<G1>(WideMul::Int64, 1500, 256 * 1024);
}

#[test]
fn msm_g2_equals_blstrs_for_sizes_portable() {
    sizes_equal_blstrs::<G2>(WideMul::Portable, &[0, 1, 2, 3, 100, 500]);
}

#[test]
fn msm_g2_equals_blstrs_for_sizes_int64() {
    sizes_equal_blstrs::<G2>(WideMul::Int64, &[0, 1, 2, 3, 100, 500]);
}

#[test]
fn msm_g2_equals_blstrs_for_special_scalars_int64() {
    special_scalars_equal_blstrs::<G2>(WideMul::Int64, 200);
}

#[test]
fn msm_g2_equals_blstrs_for_degenerate_bases_portable() {
    degenerate_bases_equal_blstrs::<G2>(WideMul::Portable, 100);
}

#[test]
fn msm_g2_chunked_path_equals_blstrs() {
    chunked_path_equals_blstrs::<G2>(WideMul::Portable, 700, 512 * 1024);
}

#[test]
fn more_scalars_than_bases_is_refused() {
    let Some(kernels) = msm_kernels::<G1>(WideMul::Portable) else {
        return;
    };
    let b = bases::<G1>(11, 2);
    let err = kernels.msm_once(&b, &random_scalars(12, 3)).unwrap_err();
    assert!(
        err.to_string().contains("3 scalars but only 2 bases"),
        "{err}"
    );
}

#[test]
fn msm_g1_with_the_default_device_equals_blstrs() {
    let b = bases::<G1>(13, 300);
    let s = sample_scalars(14, 300, ScalarMix::Skewed);
    let gpu = wgpu_groth16::msm_g1(&b, &s).unwrap();
    assert_eq!(gpu, msm_cpu::<G1>(&b, &s).unwrap());
}

/// Kernels keep the workspaces of recent plans and run smaller MSMs of the same shape in a
/// larger one (stale data from the larger run in every buffer): still equal to blstrs, in an
/// order that reuses, evicts and reallocates.
#[test]
fn msm_g1_in_reused_workspaces_equals_blstrs() {
    let Some(kernels) = msm_kernels::<G1>(WideMul::Int64) else {
        return;
    };
    let b = bases::<G1>(7, 4096);
    let s = filecoin_like_scalars(8, 4096);
    for n in [4096, 4000, 4095, 300, 4093, 1000, 4096, 3000] {
        assert_msm(kernels, &b[..n], &s[..n], "after other sizes");
    }
}

/// Scalars already on the device (an NTT vector in 128-element parts, as the H step leaves
/// them) feed the MSM directly, across part boundaries and across MSM chunks.
#[test]
fn msm_g1_from_device_scalars_equals_blstrs() {
    let (Some(kernels), Some(ntt)) = (
        msm_kernels::<G1>(WideMul::Int64),
        common::ntt_kernels_in_parts(WideMul::Int64),
    ) else {
        return;
    };
    let n = 1500;
    let b = bases::<G1>(11, n);
    let s = filecoin_like_scalars(12, 2048);
    let on_device = ntt.upload(&s, 11).unwrap();
    assert!(on_device.parts().len() > 1, "parts of 128 elements");
    let chunked = kernels.with_config(MsmConfig {
        max_binding_bytes: Some(256 << 10),
        ..Default::default()
    });
    assert!(chunked.plan(n).unwrap().chunk < n);
    for kernels in [kernels, &chunked] {
        let resident = kernels.upload_bases(&b).unwrap();
        let gpu = kernels
            .msm_from(&resident, Scalars::Device(&on_device, n))
            .unwrap();
        assert_eq!(gpu, msm_cpu::<G1>(&b, &s[..n]).unwrap());
    }
}

/// The longest loops the plan allows, which on llvmpipe come within 15% of its cap on loop
/// trips: reduction groups as long as the plan lets them be (one thread's worth of threads),
/// and segments of the longest length allowed, each summing one bucket (every scalar equal).
fn longest_loops_equal_blstrs<C: GpuCurve>(wide: WideMul, n: usize, window_bits: u32) {
    let Some(kernels) = msm_kernels::<C>(wide) else {
        return;
    };
    let b = bases::<C>(15, n);
    let long_groups = kernels.with_config(MsmConfig {
        window_bits: Some(window_bits),
        reduction_threads: Some(1),
        ..Default::default()
    });
    assert_msm(
        &long_groups,
        &b,
        &random_scalars(16, n),
        "the longest reduction groups",
    );
    let longest = kernels.point_costs().longest_segment();
    assert!(
        n >= longest as usize,
        "{n} points fill no segment of {longest}"
    );
    let long_segments = kernels.with_config(MsmConfig {
        segment: Some(longest),
        ..Default::default()
    });
    let one_scalar = vec![random_scalars(17, 1)[0]; n];
    assert_msm(
        &long_segments,
        &b,
        &one_scalar,
        "the longest segments, one bucket each",
    );
}

#[test]
fn msm_g1_longest_loops_equal_blstrs_portable() {
    longest_loops_equal_blstrs::<G1>(WideMul::Portable, 2048, 10);
}

#[test]
fn msm_g1_longest_loops_equal_blstrs_int64() {
    longest_loops_equal_blstrs::<G1>(WideMul::Int64, 2048, 14);
}

#[test]
fn msm_g2_longest_loops_equal_blstrs_portable() {
    longest_loops_equal_blstrs::<G2>(WideMul::Portable, 512, 10);
}

#[test]
fn msm_g2_longest_loops_equal_blstrs_int64() {
    longest_loops_equal_blstrs::<G2>(WideMul::Int64, 1024, 10);
}
