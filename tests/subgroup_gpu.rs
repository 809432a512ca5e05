//! The GPU's curve and subgroup checks find exactly the points blstrs refuses
//! (`is_on_curve`, blst's x = 0 rule on G1, `is_torsion_free`), on G1 and G2 and both
//! wide-multiply paths: points of the subgroup (the identity among them) pass, points off the
//! curve and points on it outside the subgroup are named by index, off the curve first, whether
//! the points come from host memory or are checked where they already are on the device; a
//! parameter file read with them refuses such a point naming its section and index, as the
//! CPU's checks do.

mod common;

use blstrs::{Fp, Fp2, G1Affine, G2Affine};
use ff::Field;
use rand_chacha::rand_core::SeedableRng;
use wgpu_groth16::curve::{sample_bases, G1, G2};
use wgpu_groth16::gpu::WideMul;
use wgpu_groth16::groth16::params::{CpuCurveCheck, CurveCheck, Invalid};
use wgpu_groth16::subgroup::SubgroupCurve;

/// Points of the test, each curve's own: on the curve, almost all outside the subgroup (x
/// drawn until x^3 + b is a square); the points (0, ±sqrt(b)), of order three, whose multiples
/// pass through the identity, P and -P, the special cases of the kernel's doubling and
/// addition; points off the curve; and points with x = 0 (the all-zero one among them).
trait TestPoints: SubgroupCurve {
    fn on_curve(seed: u64, n: usize) -> Vec<Self::Affine>;
    fn of_order_three() -> Vec<Self::Affine>;
    /// Points on the curve with y + 1: off it.
    fn off_curve(seed: u64, n: usize) -> Vec<Self::Affine>;
    /// (0, 0) and (0, y) for a random y.
    fn x_zero(seed: u64) -> Vec<Self::Affine>;
    /// The CPU's answer, the reference.
    fn first_invalid_on_cpu(points: &[Self::Affine]) -> Option<(usize, Invalid)>;
}

impl TestPoints for G1 {
    fn on_curve(seed: u64, n: usize) -> Vec<G1Affine> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut out = Vec::new();
        while out.len() < n {
            let x = Fp::random(&mut rng);
            let square = x.square() * x + Self::b();
            if let Some(y) = Option::<Fp>::from(square.sqrt()) {
                out.push(G1Affine::from_raw_unchecked(x, y, false));
            }
        }
        out
    }

    fn of_order_three() -> Vec<G1Affine> {
        let y = Fp::from(2u64);
        vec![
            G1Affine::from_raw_unchecked(Fp::ZERO, y, false),
            G1Affine::from_raw_unchecked(Fp::ZERO, -y, false),
        ]
    }

    fn off_curve(seed: u64, n: usize) -> Vec<G1Affine> {
        Self::on_curve(seed, n)
            .iter()
            .map(|p| G1Affine::from_raw_unchecked(p.x(), p.y() + Fp::ONE, false))
            .collect()
    }

    fn x_zero(seed: u64) -> Vec<G1Affine> {
        let y = Fp::random(rand_chacha::ChaCha8Rng::seed_from_u64(seed));
        [Fp::ZERO, y]
            .map(|y| G1Affine::from_raw_unchecked(Fp::ZERO, y, false))
            .to_vec()
    }

    fn first_invalid_on_cpu(points: &[G1Affine]) -> Option<(usize, Invalid)> {
        CpuCurveCheck.first_invalid_g1(points).unwrap()
    }
}

impl TestPoints for G2 {
    fn on_curve(seed: u64, n: usize) -> Vec<G2Affine> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut out = Vec::new();
        while out.len() < n {
            let x = Fp2::random(&mut rng);
            let square = x.square() * x + Self::b();
            if let Some(y) = Option::<Fp2>::from(square.sqrt()) {
                out.push(G2Affine::from_raw_unchecked(x, y, false));
            }
        }
        out
    }

    fn of_order_three() -> Vec<G2Affine> {
        Option::<Fp2>::from(Self::b().sqrt()).map_or_else(Vec::new, |y| {
            [y, -y]
                .map(|y| G2Affine::from_raw_unchecked(Fp2::ZERO, y, false))
                .to_vec()
        })
    }

    fn off_curve(seed: u64, n: usize) -> Vec<G2Affine> {
        Self::on_curve(seed, n)
            .iter()
            .map(|p| G2Affine::from_raw_unchecked(p.x(), p.y() + Fp2::ONE, false))
            .collect()
    }

    fn x_zero(seed: u64) -> Vec<G2Affine> {
        let y = Fp2::random(rand_chacha::ChaCha8Rng::seed_from_u64(seed));
        [Fp2::ZERO, y]
            .map(|y| G2Affine::from_raw_unchecked(Fp2::ZERO, y, false))
            .to_vec()
    }

    fn first_invalid_on_cpu(points: &[G2Affine]) -> Option<(usize, Invalid)> {
        CpuCurveCheck.first_invalid_g2(points).unwrap()
    }
}

fn finds_the_invalid_points<C: TestPoints>(wide: WideMul) {
    let Some(kernels) = common::subgroup_kernels::<C>(wide) else {
        return;
    };
    // In chunks of 64 (the last short) too: a point in a later chunk is named by its index
    // among all, and the first of several in different chunks wins.
    let chunked = kernels.with_points_per_dispatch(64);
    let points = sample_bases::<C>(3, 300);
    let gpu = common::gpu(common::Target::Native).expect("the kernels' device");
    // Each answer is the one the points were built to give, and the CPU's: from host memory
    // and on the device where they already are (as the MSM's resident bases hold them),
    // there with a point off the curve past the ones checked, which must not be named.
    let named = |points: &[C::Affine], expected: Option<(usize, Invalid)>, what: &str| {
        let what = format!("{} {wide}: {what}", C::NAME);
        assert_eq!(C::first_invalid_on_cpu(points), expected, "CPU, {what}");
        let mut held = points.to_vec();
        held.push(C::off_curve_point());
        let held = gpu
            .storage_buffer("test points", C::affine_bytes(&held))
            .unwrap();
        for (kernels, chunks) in [(kernels, "one chunk"), (&chunked, "64 a chunk")] {
            assert_eq!(
                kernels.first_invalid(points).unwrap(),
                expected,
                "{chunks}, {what}"
            );
            let on_device = kernels.findings_on_device(&held, points.len()).unwrap();
            assert_eq!(
                on_device.first_invalid(),
                expected,
                "{chunks}, on the device, {what}"
            );
        }
    };
    named(&points, None, "the subgroup's points");
    let short = gpu
        .storage_buffer("test points", C::affine_bytes(&points[..10]))
        .unwrap();
    assert!(
        kernels.findings_on_device(&short, 11).is_err(),
        "more points than the buffer holds"
    );
    named(&[], None, "no points");
    let outside = C::on_curve(4, 3);
    for (at, point) in [(0, outside[0]), (299, outside[1]), (150, outside[2])] {
        let mut altered = points.clone();
        altered[at] = point;
        named(&altered, Some((at, Invalid::Outside)), "a point outside");
    }
    // blst refuses G1's x = 0, so these are off the curve where it is refused.
    let x_zero_is = |at| match C::X_ZERO_REFUSED {
        true => Some((at, Invalid::OffCurve)),
        false => Some((at, Invalid::Outside)),
    };
    for point in C::of_order_three() {
        let mut altered = points.clone();
        altered[250] = point;
        altered[5] = point;
        named(&altered, x_zero_is(5), "a point of order three");
        // The subgroup kernel alone: its ladder meets -P (2P), then P + -P, where the
        // addition gives the identity, which fails the comparison.
        for kernels in [kernels, &chunked] {
            assert_eq!(kernels.findings(&altered).unwrap().outside, Some(5));
        }
    }
    let [zero, zero_x] = C::x_zero(5)[..] else {
        unreachable!("two points")
    };
    let mut altered = points.clone();
    altered[60] = zero;
    let zero_is = C::X_ZERO_REFUSED.then_some((60, Invalid::OffCurve));
    named(
        &altered,
        zero_is,
        "(0, 0), the identity (x = 0 for blst on G1)",
    );
    altered[60] = zero_x;
    named(&altered, Some((60, Invalid::OffCurve)), "(0, y)");
    for (at, point) in [0, 120, 299].into_iter().zip(C::off_curve(6, 3)) {
        let mut altered = points.clone();
        altered[at] = point;
        named(
            &altered,
            Some((at, Invalid::OffCurve)),
            "a point off the curve",
        );
    }
    // The first of several; a point off the curve before any outside, wherever it is.
    let mut altered = points.clone();
    altered[200] = outside[0];
    altered[40] = outside[1];
    named(&altered, Some((40, Invalid::Outside)), "two outside");
    altered[40] = points[40];
    named(&altered, Some((200, Invalid::Outside)), "one outside");
    altered[230] = C::off_curve(7, 1)[0];
    named(
        &altered,
        Some((230, Invalid::OffCurve)),
        "off the curve after outside",
    );
}

#[test]
fn g1_invalid_points_are_found_int64() {
    finds_the_invalid_points::<G1>(WideMul::Int64);
}

#[test]
fn g1_invalid_points_are_found_portable() {
    finds_the_invalid_points::<G1>(WideMul::Portable);
}

#[test]
fn g2_invalid_points_are_found_int64() {
    finds_the_invalid_points::<G2>(WideMul::Int64);
}

#[test]
fn g2_invalid_points_are_found_portable() {
    finds_the_invalid_points::<G2>(WideMul::Portable);
}

/// A parameter file read with the GPU's checks: whole, it reads as written; with a point
/// outside the subgroup in `l` or `b_g2`, or off the curve in `a` or `h` (x = 0), it is
/// refused naming the section, the index and blst's reason, as with the CPU's checks.
fn parameter_files_are_refused_naming_the_point(wide: WideMul) {
    use wgpu_groth16::groth16::circuits::FilecoinLike;
    use wgpu_groth16::groth16::synthesis::synthesize;
    use wgpu_groth16::groth16::{CheckRecords, Checked, ProvingParameters};
    use wgpu_groth16::Error;

    let Some(on_gpu) = common::curve_check(wide) else {
        return;
    };
    let shape = synthesize(FilecoinLike::new(6, 1).unwrap())
        .unwrap()
        .shape();
    let params = ProvingParameters::random_for_shape(&shape, 2);
    let dir = std::env::temp_dir().join(format!(
        "wgpu-groth16-subgroup-{}-{wide}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |params: &ProvingParameters, name: &str| {
        let path = dir.join(name);
        let mut bytes = Vec::new();
        params.write(&mut bytes).unwrap();
        std::fs::write(&path, bytes).unwrap();
        path
    };
    let read = |path: &std::path::Path, check: &dyn CurveCheck| {
        ProvingParameters::read_checked_once_with(path, &CheckRecords::none(), check)
    };
    let (read_back, how) = read(&write(&params, "whole.params"), on_gpu).unwrap();
    assert_eq!(how, Checked::Now);
    assert!(read_back.l == params.l && read_back.b_g2 == params.b_g2);

    let mut bad_l = params.clone();
    let mut l = bad_l.l.to_vec();
    l[5] = G1::on_curve(5, 1)[0];
    bad_l.l = std::sync::Arc::new(l);
    let mut bad_b = params.clone();
    let mut b_g2 = bad_b.b_g2.to_vec();
    let last = b_g2.len() - 1;
    b_g2[last] = G2::on_curve(6, 1)[0];
    bad_b.b_g2 = std::sync::Arc::new(b_g2);
    let mut bad_a = params.clone();
    let mut a = bad_a.a.to_vec();
    a[3] = G1::off_curve(7, 1)[0];
    bad_a.a = std::sync::Arc::new(a);
    let mut bad_h = params.clone();
    let mut h = bad_h.h.to_vec();
    h[9] = G1::of_order_three()[1];
    bad_h.h = std::sync::Arc::new(h);
    for (bad, section, index, why) in [
        (bad_l, "l", 5, "subgroup"),
        (bad_b, "b_g2", last, "subgroup"),
        (bad_a, "a", 3, "not on the curve"),
        (bad_h, "h", 9, "x = 0"),
    ] {
        let path = write(&bad, &format!("{section}.params"));
        for check in [on_gpu as &dyn CurveCheck, &CpuCurveCheck] {
            match read(&path, check) {
                Err(Error::ParamsInvalidPoint {
                    section: s,
                    index: i,
                    reason,
                }) => {
                    assert_eq!((s, i), (section, index), "{}", check.describe());
                    assert!(reason.contains(why), "{reason}");
                }
                other => panic!("{section}: {:?}", other.map(|(_, how)| how)),
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn parameter_files_with_a_point_outside_are_refused_on_the_gpu_int64() {
    parameter_files_are_refused_naming_the_point(WideMul::Int64);
}

#[test]
fn parameter_files_with_a_point_outside_are_refused_on_the_gpu_portable() {
    parameter_files_are_refused_naming_the_point(WideMul::Portable);
}
