//! The WGSL of the fields, which the programs computing on them include.

use crate::gpu::WideMul;

const FQ: &str = include_str!("../../shaders/gen/fq.wgsl");
const FR: &str = include_str!("../../shaders/gen/fr.wgsl");
const FQ2: &str = include_str!("../../shaders/fq2.wgsl");

/// Fq2 = Fq\[u\] / (u^2 + 1), over [`fq`], and its multiplication as the `wide` path writes
/// it: two sums of products reduced once each on the int64 path (`fq_mul_sum`), Karatsuba
/// on the portable path.
pub fn fq2(wide: WideMul) -> [&'static str; 2] {
    match wide {
        WideMul::Portable => [FQ2, include_str!("../../shaders/fq2_mul_karatsuba.wgsl")],
        WideMul::Int64 => [FQ2, include_str!("../../shaders/fq2_mul_sums.wgsl")],
    }
}

/// Fq and its multiplication as the `wide` path writes it: over 30-bit limbs in u64
/// accumulators on the int64 path (the fastest form measured, docs/benchmarks/field.md), a
/// rolled CIOS through `mac` on the portable path, which serves GL and software adapters,
/// whose compilers spent most of a cold run on an unrolled form
/// (docs/benchmarks/cold-start.md).
pub fn fq(wide: WideMul) -> [&'static str; 2] {
    match wide {
        WideMul::Portable => [FQ, include_str!("../../shaders/gen/fq_mul_rolled.wgsl")],
        WideMul::Int64 => [FQ, include_str!("../../shaders/gen/fq_mul_lazy.wgsl")],
    }
}

/// Loop trips of one multiplication of a field of `limbs` 32-bit limbs as llvmpipe counts
/// them ([`MAX_LOOP_TRIPS`](crate::gpu::MAX_LOOP_TRIPS)): the rolled form loops once per limb
/// of b, plus the exit test; the int64 form is straight-line.
pub fn mul_loop_trips(wide: WideMul, limbs: usize) -> u32 {
    match wide {
        WideMul::Portable => limbs as u32 + 1,
        WideMul::Int64 => 0,
    }
}

/// Fr as [`fq`] writes Fq.
pub fn fr(wide: WideMul) -> [&'static str; 2] {
    match wide {
        WideMul::Portable => [FR, include_str!("../../shaders/gen/fr_mul_rolled.wgsl")],
        WideMul::Int64 => [FR, include_str!("../../shaders/gen/fr_mul_lazy.wgsl")],
    }
}

/// What code over Fr includes: the wide multiply and carry chains, Fr.
pub fn with_fr(wide: WideMul) -> Vec<&'static str> {
    let [fr, fr_mul] = fr(wide);
    vec![wide.source(), fr, fr_mul]
}

/// What code over Fq and Fr includes: [`with_fr`] and Fq.
pub fn with_fq_and_fr(wide: WideMul) -> Vec<&'static str> {
    let [fq, fq_mul] = fq(wide);
    let mut parts = with_fr(wide);
    parts.extend([fq, fq_mul]);
    parts
}
