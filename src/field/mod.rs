//! Host side of the field elements the shaders compute on.
//!
//! blstrs keeps `Scalar` (Fr), `Fp` (Fq) and `Fp2` in Montgomery form as little-endian u64
//! limbs, R = 2^256 / 2^384. On a little-endian host the same bytes are little-endian u32
//! limbs in Montgomery form with the same R, which is exactly what `shaders/gen/*.wgsl`
//! compute on: slices go to the GPU as they are, with no per-element conversion.

pub mod bench;
pub mod check;
pub mod ops;
pub mod samples;
pub mod wgsl;

use crate::gpu::WideMul;
use blstrs::{Fp, Fp2, Scalar};

#[cfg(not(target_endian = "little"))]
compile_error!("the GPU limb layout relies on a little-endian host");

/// A field element type whose in-memory form is the shader's limb layout.
///
/// # Safety
/// Implementors must be `repr(transparent)` (or `repr(C)`) over exactly `LIMBS` u32 words of
/// Montgomery-form limbs with no padding, and every such bit pattern produced by our shaders
/// must be a valid value (the shaders only ever write reduced elements).
pub unsafe trait GpuField:
    Copy + Send + Sync + PartialEq + std::fmt::Debug + 'static
{
    /// u32 words per element.
    const LIMBS: usize;
    /// Name used in shaders and messages (`fq`, `fr`, `fq2`).
    const NAME: &'static str;

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
        out
    }
}

const _: () = assert!(std::mem::size_of::<Fp>() == 48);
const _: () = assert!(std::mem::size_of::<Scalar>() == 32);
const _: () = assert!(std::mem::size_of::<Fp2>() == 96);

// SAFETY: `Fp` is repr(transparent) over blst_fp, six u64 Montgomery limbs.
unsafe impl GpuField for Fp {
    const LIMBS: usize = 12;
    const NAME: &'static str = "fq";
}

// SAFETY: `Scalar` is repr(transparent) over blst_fr, four u64 Montgomery limbs.
unsafe impl GpuField for Scalar {
    const LIMBS: usize = 8;
    const NAME: &'static str = "fr";
}

// SAFETY: `Fp2` is repr(transparent) over blst_fp2, two blst_fp (c0 then c1).
unsafe impl GpuField for Fp2 {
    const LIMBS: usize = 24;
    const NAME: &'static str = "fq2";

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
