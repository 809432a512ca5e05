//! The two groups the prover computes in, as the GPU sees them.
//!
//! Affine bases upload in blstrs' own memory layout (x then y, Montgomery limbs, identity
//! (0, 0)); the kernels return XYZZ accumulators, which become blstrs' Jacobian points here
//! without an inversion.

use crate::field::{wgsl, GpuField};
use crate::gpu::WideMul;
use blstrs::{Fp, Fp2, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};

/// G1 or G2, with everything the MSM needs to run it on the GPU and on the CPU.
pub trait GpuCurve: Send + Sync + 'static {
    type Affine: PrimeCurveAffine<Curve = Self::Projective> + Copy + Send + Sync + 'static;
    type Projective: group::Curve<AffineRepr = Self::Affine>
        + Group<Scalar = Scalar>
        + Copy
        + Send
        + Sync
        + std::fmt::Debug
        + 'static;
    /// The coordinate field (Fq or Fq2).
    type Base: GpuField + ff::Field;

    const NAME: &'static str;
    /// Name of the curve's MSM program in labels and messages.
    const MSM_NAME: &'static str;
    /// The WGSL of the coordinate field under the name `Field` (over Fq's, which programs
    /// include first) as the `wide` path writes it, for `shaders/curve.wgsl`.
    fn field_wgsl(wide: WideMul) -> Vec<&'static str>;
    /// Default sorted entries per MSM accumulation thread: G1's time is flat over 16..128
    /// (64 keeps 2^24 points in one chunk under a 2 GiB binding limit); G2's is best from 32
    /// on, where fewer entries a thread need more chunks (docs/benchmarks/msm.md).
    const SEGMENT: u32;
    /// What the reduction costs a bucket, in the additions of the MSM's accumulation (the
    /// plan weighs wider windows' buckets against fewer windows' entries with it): about 4
    /// on G1 by the measured reduction and accumulation rates; more on G2, where wider
    /// windows measured slower (docs/benchmarks/gpu-part-2-27.md, commit f1e7e85).
    const BUCKET_COST: u64;

    /// Bytes of one affine point on the GPU (two coordinates).
    const AFFINE_BYTES: usize = 2 * std::mem::size_of::<Self::Base>();
    /// Bytes of one XYZZ accumulator on the GPU (four coordinates).
    const XYZZ_BYTES: usize = 4 * std::mem::size_of::<Self::Base>();

    /// The points' bytes, ready to upload.
    fn affine_bytes(points: &[Self::Affine]) -> &[u8];

    /// The Jacobian point with these Jacobian coordinates.
    fn from_jacobian(x: Self::Base, y: Self::Base, z: Self::Base) -> Self::Projective;

    /// A point's Jacobian coordinates (x = X/Z², y = Y/Z³; identity Z = 0).
    fn jacobian(point: &Self::Projective) -> [Self::Base; 3];

    /// The affine point (x, y), unchecked.
    fn from_affine_coordinates(x: Self::Base, y: Self::Base) -> Self::Affine;

    /// `points` in affine form with one field inversion for all of them (Montgomery's
    /// trick): blstrs' `batch_normalize` inverts once a point, 60% of the time of making
    /// random bases.
    fn to_affine_batch(points: &[Self::Projective], out: &mut [Self::Affine]) {
        let coordinates: Vec<[Self::Base; 3]> = points.iter().map(Self::jacobian).collect();
        // Prefix products of the nonzero Z, then one inversion walked back down.
        let mut products = Vec::with_capacity(points.len());
        let mut product = Self::Base::ONE;
        for [_, _, z] in &coordinates {
            products.push(product);
            if !z.is_zero_vartime() {
                product *= z;
            }
        }
        let mut inverse = product.invert().unwrap_or(Self::Base::ZERO);
        for (([x, y, z], before), out) in coordinates.iter().zip(products).zip(out).rev() {
            if z.is_zero_vartime() {
                *out = Self::Affine::identity();
                continue;
            }
            let z_inverse = inverse * before;
            inverse *= z;
            let z2 = z_inverse.square();
            *out = Self::from_affine_coordinates(*x * z2, *y * z2 * z_inverse);
        }
    }

    /// blstrs' CPU multi-exponentiation: the reference every GPU result is compared with.
    fn multi_exp_cpu(bases: &[Self::Affine], scalars: &[Scalar]) -> Self::Projective;

    /// The point an XYZZ accumulator (X, Y, ZZ, ZZZ; x = X/ZZ, y = Y/ZZZ; identity ZZ = 0)
    /// read back from the GPU stands for.
    fn from_xyzz(bytes: &[u8]) -> Self::Projective {
        let c = Self::Base::from_bytes(bytes);
        let (x, y, zz, zzz) = (c[0], c[1], c[2], c[3]);
        if zz.is_zero_vartime() {
            return Self::Projective::identity();
        }
        // Jacobian with Z = ZZ·ZZZ: x = X·ZZ·ZZZ² / Z², y = Y·ZZ³·ZZZ² / Z³.
        let zzz2 = zzz.square();
        let z = zz * zzz;
        Self::from_jacobian(x * zz * zzz2, y * zz.square() * zz * zzz2, z)
    }
}

/// XYZZ point addition over `Field` (shaders/curve.wgsl), after a curve's [`GpuCurve::field_wgsl`].
pub const CURVE_WGSL: &str = include_str!("../shaders/curve.wgsl");

// SAFETY (both impls): G1Affine / G2Affine are repr(transparent) over blst's affine points,
// two coordinates of Fp / Fp2 with no padding.
const _: () = assert!(std::mem::size_of::<G1Affine>() == 96);
const _: () = assert!(std::mem::size_of::<G2Affine>() == 192);

fn bytes_of<T>(values: &[T]) -> &[u8] {
    // SAFETY: only called on the repr(transparent) affine types checked above, which are plain
    // field limbs.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast(), std::mem::size_of_val(values)) }
}

/// `n` distinct points P + i·Q for seeded random P, Q: inputs for tests and benchmarks,
/// made in parallel without a scalar multiplication per point.
pub fn sample_bases<C: GpuCurve>(seed: u64, n: usize) -> Vec<C::Affine> {
    use rand_chacha::rand_core::SeedableRng;
    use rayon::prelude::*;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let p = C::Projective::random(&mut rng);
    let q = C::Projective::random(&mut rng);
    const RUN: usize = 1 << 12;
    let mut out = vec![C::Affine::identity(); n];
    // Mixed additions of an affine Q: cheaper than Jacobian ones.
    let q_affine = q.to_affine();
    out.par_chunks_mut(RUN).enumerate().for_each(|(k, part)| {
        let mut point = p + q * Scalar::from((k * RUN) as u64);
        let projective: Vec<C::Projective> = (0..part.len())
            .map(|_| {
                point += q_affine;
                point
            })
            .collect();
        C::to_affine_batch(&projective, part);
    });
    out
}

pub struct G1;
pub struct G2;

impl GpuCurve for G1 {
    type Affine = G1Affine;
    type Projective = G1Projective;
    type Base = Fp;
    const NAME: &'static str = "g1";
    const MSM_NAME: &'static str = "MsmG1";
    const SEGMENT: u32 = 64;
    const BUCKET_COST: u64 = 4;

    fn field_wgsl(_: WideMul) -> Vec<&'static str> {
        vec![include_str!("../shaders/g1_field.wgsl")]
    }

    fn affine_bytes(points: &[G1Affine]) -> &[u8] {
        bytes_of(points)
    }

    fn from_jacobian(x: Fp, y: Fp, z: Fp) -> G1Projective {
        G1Projective::from_raw_unchecked(x, y, z)
    }

    fn jacobian(point: &G1Projective) -> [Fp; 3] {
        [point.x(), point.y(), point.z()]
    }

    fn from_affine_coordinates(x: Fp, y: Fp) -> G1Affine {
        G1Affine::from_raw_unchecked(x, y, false)
    }

    fn multi_exp_cpu(bases: &[G1Affine], scalars: &[Scalar]) -> G1Projective {
        let points: Vec<G1Projective> = bases.iter().map(Into::into).collect();
        G1Projective::multi_exp(&points, scalars)
    }
}

impl GpuCurve for G2 {
    type Affine = G2Affine;
    type Projective = G2Projective;
    type Base = Fp2;
    const NAME: &'static str = "g2";
    const MSM_NAME: &'static str = "MsmG2";
    const SEGMENT: u32 = 32;
    const BUCKET_COST: u64 = 12;

    fn field_wgsl(wide: WideMul) -> Vec<&'static str> {
        let mut parts = wgsl::fq2(wide).to_vec();
        parts.push(include_str!("../shaders/g2_field.wgsl"));
        parts
    }

    fn affine_bytes(points: &[G2Affine]) -> &[u8] {
        bytes_of(points)
    }

    fn from_jacobian(x: Fp2, y: Fp2, z: Fp2) -> G2Projective {
        G2Projective::from_raw_unchecked(x, y, z)
    }

    fn jacobian(point: &G2Projective) -> [Fp2; 3] {
        [point.x(), point.y(), point.z()]
    }

    fn from_affine_coordinates(x: Fp2, y: Fp2) -> G2Affine {
        G2Affine::from_raw_unchecked(x, y, false)
    }

    fn multi_exp_cpu(bases: &[G2Affine], scalars: &[Scalar]) -> G2Projective {
        let points: Vec<G2Projective> = bases.iter().map(Into::into).collect();
        G2Projective::multi_exp(&points, scalars)
    }
}
