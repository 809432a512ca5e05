//! Host side of the field elements the shaders compute on.
//!
//! blstrs keeps `Scalar` (Fr), `Fp` (Fq) and `Fp2` in Montgomery form as little-endian u64
//! limbs, R = 2^256 / 2^384. On a little-endian host the same bytes are little-endian u32
//! limbs in Montgomery form with the same R, which is exactly what `shaders/gen/*.wgsl`
//! compute on: slices go to the GPU as they are, with no per-element conversion. Back from
//! the GPU, elements are reduced below the modulus: the int64 path keeps Fq below 2p.

pub mod bench;
pub mod check;
pub mod ops;
pub mod samples;
pub mod wgsl;

use crate::gpu::WideMul;
use blstrs::{Fp, Fp2, Scalar};

#[cfg(not(target_endian = "little"))]
compile_error!("the GPU limb layout relies on a little-endian host");

/// `len` zero elements in memory allocated zeroed: its pages are first touched by whoever
/// writes them (a read-back's copy threads), not one by one here: `vec![ZERO; len]` wrote
/// every element on one thread first (~2 s a GiB on a 2-core host).
pub fn zeroed_vec<T: GpuField>(len: usize) -> Vec<T> {
    let Ok(layout) = std::alloc::Layout::array::<T>(len) else {
        std::alloc::handle_alloc_error(std::alloc::Layout::new::<T>())
    };
    if layout.size() == 0 {
        return Vec::new();
    }
    // SAFETY: the memory is allocated by the global allocator with the layout of `len`
    // elements of T, as `Vec::from_raw_parts` requires; every element is LIMBS zero words
    // (the trait's contract), the Montgomery form of zero.
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout).cast::<T>();
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout)
        }
        Vec::from_raw_parts(ptr, len, len)
    }
}

/// A field element type whose in-memory form is the shader's limb layout.
///
/// # Safety
/// Implementors must be `repr(transparent)` (or `repr(C)`) over exactly `LIMBS` u32 words of
/// Montgomery-form limbs with no padding, made of prime-field limbs below `MODULUS` once
/// [`reduce_read_back`](GpuField::reduce_read_back) has run (the shaders write elements below
/// twice the modulus).
pub unsafe trait GpuField:
    Copy + Send + Sync + PartialEq + std::fmt::Debug + 'static
{
    /// u32 words per element.
    const LIMBS: usize;
    /// Name used in shaders and messages (`fq`, `fr`, `fq2`).
    const NAME: &'static str;
    /// The modulus of the prime field whose elements make up this one, little-endian words.
    const MODULUS: &'static [u32];

    /// Brings elements read back from the GPU below the modulus: each prime-field part below
    /// twice the modulus (shaders/gen/fq_mul_lazy.wgsl's `fq_bound`) loses it once. On every
    /// rayon thread: a 2^27 vector read back is 4 GiB.
    fn reduce_read_back(values: &mut [Self]) {
        use rayon::prelude::*;
        let words: &mut [u32] = bytemuck::cast_slice_mut(Self::as_bytes_mut(values));
        let part = Self::MODULUS.len();
        words.par_chunks_mut(part << 14).for_each(|block| {
            for element in block.chunks_exact_mut(part) {
                subtract_once_if_at_least(element, Self::MODULUS);
            }
        });
    }

    /// Loop trips of one multiplication on the `wide` path as llvmpipe counts them
    /// ([`wgsl::mul_loop_trips`]).
    fn mul_loop_trips(wide: WideMul) -> u32 {
        wgsl::mul_loop_trips(wide, Self::LIMBS)
    }

    /// The elements' bytes, ready to upload.
    fn as_bytes(values: &[Self]) -> &[u8] {
        // SAFETY: the trait's contract makes every element LIMBS u32 words without padding.
        unsafe { std::slice::from_raw_parts(values.as_ptr().cast(), std::mem::size_of_val(values)) }
    }

    /// The elements' bytes, to be overwritten with elements in the same layout (read-back).
    fn as_bytes_mut(values: &mut [Self]) -> &mut [u8] {
        // SAFETY: as `as_bytes`; every bit pattern written back is a value the shader made in
        // this same layout.
        unsafe {
            std::slice::from_raw_parts_mut(
                values.as_mut_ptr().cast(),
                std::mem::size_of_val(values),
            )
        }
    }

    /// Elements from bytes in the shader layout (as read back from the GPU).
    fn from_bytes(bytes: &[u8]) -> Vec<Self> {
        let size = std::mem::size_of::<Self>();
        assert_eq!(
            bytes.len() % size,
            0,
            "read-back is not whole {} elements",
            Self::NAME
        );
        let count = bytes.len() / size;
        let mut out = Vec::<Self>::with_capacity(count);
        // SAFETY: the destination has room for `count` elements, the copy is bytewise (the
        // source may be unaligned) and the trait's contract makes these bytes valid values.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                out.as_mut_ptr().cast::<u8>(),
                bytes.len(),
            );
            out.set_len(count);
        }
        Self::reduce_read_back(&mut out);
        out
    }
}

/// Whether `value < modulus` (little-endian words of equal length).
pub(crate) fn is_below<W: PartialOrd>(value: &[W], modulus: &[W]) -> bool {
    value
        .iter()
        .rev()
        .zip(modulus.iter().rev())
        .find(|(v, m)| v != m)
        .is_some_and(|(v, m)| v < m)
}

/// `value - modulus` when `value >= modulus` (little-endian words of equal length).
fn subtract_once_if_at_least(value: &mut [u32], modulus: &[u32]) {
    if is_below(value, modulus) {
        return;
    }
    let mut borrow = false;
    for (v, &m) in value.iter_mut().zip(modulus) {
        let (d, b1) = v.overflowing_sub(m);
        let (d, b2) = d.overflowing_sub(borrow as u32);
        *v = d;
        borrow = b1 || b2;
    }
}

/// p, the modulus of Fq.
const P_WORDS: [u32; 12] = [
    0xffffaaab, 0xb9feffff, 0xb153ffff, 0x1eabfffe, 0xf6b0f624, 0x6730d2a0, 0xf38512bf, 0x64774b84,
    0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea,
];

/// r, the modulus of Fr.
const R_WORDS: [u32; 8] = [
    0x00000001, 0xffffffff, 0xfffe5bfe, 0x53bda402, 0x09a1d805, 0x3339d808, 0x299d7d48, 0x73eda753,
];

const _: () = assert!(std::mem::size_of::<Fp>() == 48);
const _: () = assert!(std::mem::size_of::<Scalar>() == 32);
const _: () = assert!(std::mem::size_of::<Fp2>() == 96);

// SAFETY: `Fp` is repr(transparent) over blst_fp, six u64 Montgomery limbs.
unsafe impl GpuField for Fp {
    const LIMBS: usize = 12;
    const NAME: &'static str = "fq";
    const MODULUS: &'static [u32] = &P_WORDS;
}

// SAFETY: `Scalar` is repr(transparent) over blst_fr, four u64 Montgomery limbs.
unsafe impl GpuField for Scalar {
    const LIMBS: usize = 8;
    const NAME: &'static str = "fr";
    const MODULUS: &'static [u32] = &R_WORDS;
}

// SAFETY: `Fp2` is repr(transparent) over blst_fp2, two blst_fp (c0 then c1).
unsafe impl GpuField for Fp2 {
    const LIMBS: usize = 24;
    const NAME: &'static str = "fq2";
    const MODULUS: &'static [u32] = &P_WORDS;

    /// A loop over three Fq products (Karatsuba, portable) or two sums of products (int64),
    /// one Fq multiplication each (`shaders/fq2_mul_*.wgsl`).
    fn mul_loop_trips(wide: WideMul) -> u32 {
        let products = match wide {
            WideMul::Portable => 3,
            WideMul::Int64 => 2,
        };
        products + 1 + products * Fp::mul_loop_trips(wide)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;

    /// The modulus as words, from blstrs: -1's canonical bytes, plus one.
    fn modulus_of(minus_one_le: &[u8]) -> Vec<u32> {
        let mut words: Vec<u32> = bytemuck::pod_collect_to_vec(minus_one_le);
        words[0] += 1; // the low word of p - 1 and of r - 1 is not all ones
        words
    }

    #[test]
    fn zeroed_vectors_hold_zeros() {
        assert_eq!(zeroed_vec::<Scalar>(1000), vec![Scalar::ZERO; 1000]);
        assert_eq!(zeroed_vec::<Fp>(3), vec![Fp::ZERO; 3]);
        assert_eq!(zeroed_vec::<Fp2>(5), vec![Fp2::ZERO; 5]);
        assert!(zeroed_vec::<Scalar>(0).is_empty());
        let mut grown = zeroed_vec::<Scalar>(2);
        grown.push(Scalar::ONE);
        assert_eq!(grown, [Scalar::ZERO, Scalar::ZERO, Scalar::ONE]);
    }

    #[test]
    fn moduli_are_blstrs_moduli() {
        assert_eq!(modulus_of(&(-Fp::ONE).to_bytes_le()), P_WORDS);
        assert_eq!(modulus_of(&(-Scalar::ONE).to_bytes_le()), R_WORDS);
    }

    #[test]
    fn read_back_elements_below_twice_the_modulus_are_reduced() {
        use rand_chacha::rand_core::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let values: Vec<Fp> = (0..64)
            .map(|_| Fp::random(&mut rng))
            .chain([Fp::ZERO, -Fp::ONE])
            .collect();
        // Each value plus p, as the int64 path's shaders may write it.
        let raised = samples::plus_modulus(&values);
        assert_eq!(Fp::from_bytes(Fp::as_bytes(&raised)), values);
        assert_eq!(Fp::from_bytes(Fp::as_bytes(&values)), values);
        let pairs: Vec<Fp2> = values.chunks(2).map(|c| Fp2::new(c[0], c[1])).collect();
        assert_eq!(Fp2::from_bytes(Fp::as_bytes(&raised)), pairs);
    }
}
