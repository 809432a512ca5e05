//! The GPU's subgroup check finds exactly the points blstrs' `is_torsion_free` refuses, on G1
//! and G2 and both wide-multiply paths: points of the subgroup (the identity among them)
//! pass, points on the curve outside it are named by index; a parameter file read with it
//! refuses such a point naming its section and index, as the CPU's check does.

mod common;

use blstrs::{Fp, Fp2, G1Affine, G2Affine};
use ff::Field;
use rand_chacha::rand_core::SeedableRng;
use wgpu_groth16::curve::{sample_bases, G1, G2};
use wgpu_groth16::gpu::WideMul;
use wgpu_groth16::subgroup::SubgroupCurve;

/// Points on the curve, almost all outside the subgroup: x drawn until x^3 + b is a square;
/// and the points (0, ±sqrt(b)), of order three, whose multiples pass through the identity,
/// P and -P, the special cases of the kernel's doubling and addition.
trait OffSubgroup: SubgroupCurve {
    fn on_curve(seed: u64, n: usize) -> Vec<Self::Affine>;
    fn of_order_three() -> Vec<Self::Affine>;
}

impl OffSubgroup for G1 {
    fn on_curve(seed: u64, n: usize) -> Vec<G1Affine> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut out = Vec::new();
        while out.len() < n {
            let x = Fp::random(&mut rng);
            let square = x.square() * x + Fp::from(4u64);
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
}

impl OffSubgroup for G2 {
    fn on_curve(seed: u64, n: usize) -> Vec<G2Affine> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let b = Fp2::new(Fp::from(4u64), Fp::from(4u64));
        let mut out = Vec::new();
        while out.len() < n {
            let x = Fp2::random(&mut rng);
            let square = x.square() * x + b;
            if let Some(y) = Option::<Fp2>::from(square.sqrt()) {
                out.push(G2Affine::from_raw_unchecked(x, y, false));
            }
        }
        out
    }

    fn of_order_three() -> Vec<G2Affine> {
        let b = Fp2::new(Fp::from(4u64), Fp::from(4u64));
        Option::<Fp2>::from(b.sqrt()).map_or_else(Vec::new, |y| {
            [y, -y]
                .map(|y| G2Affine::from_raw_unchecked(Fp2::ZERO, y, false))
                .to_vec()
        })
    }
}

fn finds_the_points_outside<C: OffSubgroup>(wide: WideMul) {
    let Some(kernels) = common::subgroup_kernels::<C>(wide) else {
        return;
    };
    let mut points = sample_bases::<C>(3, 300);
    points[7] = <C::Affine as group::prime::PrimeCurveAffine>::identity();
    assert_eq!(
        kernels.first_outside(&points).unwrap(),
        None,
        "{} {wide}",
        C::NAME
    );
    let outside = C::on_curve(4, 3);
    for point in &outside {
        assert!(
            !C::in_subgroup_on_cpu(point),
            "the test needs points outside"
        );
    }
    for (at, point) in [(0, outside[0]), (299, outside[1]), (150, outside[2])] {
        let mut altered = points.clone();
        altered[at] = point;
        assert_eq!(
            kernels.first_outside(&altered).unwrap(),
            Some(at),
            "{} {wide}: a point outside at {at}",
            C::NAME
        );
    }
    for point in C::of_order_three() {
        assert!(!C::in_subgroup_on_cpu(&point), "order three, outside");
        let mut altered = points.clone();
        altered[250] = point;
        altered[5] = point;
        assert_eq!(
            kernels.first_outside(&altered).unwrap(),
            Some(5),
            "{} {wide}: a point of order three",
            C::NAME
        );
    }
    // The first of several.
    let mut altered = points.clone();
    altered[200] = outside[0];
    altered[40] = outside[1];
    assert_eq!(kernels.first_outside(&altered).unwrap(), Some(40));
    assert_eq!(kernels.first_outside(&[]).unwrap(), None);
    // In chunks of 64 (the last short): a point in a later chunk is named by its index among
    // all, and the first of several in different chunks wins.
    let chunked = kernels.with_points_per_dispatch(64);
    assert_eq!(chunked.first_outside(&points).unwrap(), None);
    assert_eq!(chunked.first_outside(&altered).unwrap(), Some(40));
    altered[40] = points[40];
    assert_eq!(chunked.first_outside(&altered).unwrap(), Some(200));
}

#[test]
fn g1_points_outside_the_subgroup_are_found_int64() {
    finds_the_points_outside::<G1>(WideMul::Int64);
}

#[test]
fn g1_points_outside_the_subgroup_are_found_portable() {
    finds_the_points_outside::<G1>(WideMul::Portable);
}

#[test]
fn g2_points_outside_the_subgroup_are_found_int64() {
    finds_the_points_outside::<G2>(WideMul::Int64);
}

#[test]
fn g2_points_outside_the_subgroup_are_found_portable() {
    finds_the_points_outside::<G2>(WideMul::Portable);
}

/// A parameter file read with the GPU's checks: whole, it reads as written; with a point
/// outside the subgroup in `l` or `b_g2`, it is refused naming the section and the index,
/// as with the CPU's checks.
fn parameter_files_are_refused_naming_the_point(wide: WideMul) {
    use wgpu_groth16::groth16::circuits::FilecoinLike;
    use wgpu_groth16::groth16::params::{CpuSubgroupCheck, SubgroupCheck};
    use wgpu_groth16::groth16::synthesis::synthesize;
    use wgpu_groth16::groth16::{CheckRecords, Checked, ProvingParameters};
    use wgpu_groth16::Error;

    let Some(on_gpu) = common::subgroup_check(wide) else {
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
    let read = |path: &std::path::Path, check: &dyn SubgroupCheck| {
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
    for (bad, section, index) in [(bad_l, "l", 5), (bad_b, "b_g2", last)] {
        let path = write(&bad, &format!("{section}.params"));
        for check in [on_gpu as &dyn SubgroupCheck, &CpuSubgroupCheck] {
            match read(&path, check) {
                Err(Error::ParamsInvalidPoint {
                    section: s,
                    index: i,
                    reason,
                }) => {
                    assert_eq!((s, i), (section, index), "{}", check.describe());
                    assert!(reason.contains("subgroup"), "{reason}");
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
