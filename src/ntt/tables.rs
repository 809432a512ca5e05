//! Power tables of one domain size, cached per size by the kernels.

use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::prelude::*;

use crate::error::Result;
use crate::field::GpuField;
use crate::gpu::pool::{BufferPool, Reservation};
use crate::gpu::GpuContext;

/// Bases whose powers the kernels take from tables, in table order.
pub const OMEGA: usize = 0;
pub const OMEGA_INV: usize = 1;
pub const COSET: usize = 2;
pub const COSET_INV: usize = 3;

/// log2 of the most entries a table's high part holds by default: 2^21 (64 MiB a base). A
/// twiddle whose exponent is a multiple of 2^split costs no product, so at 2^27 only the
/// last 6 stages pay one, where a split of half the bits (2^14 entries) made the last 13 pay
/// (docs/benchmarks/gpu-part-2-27.md, commit 058b4ea); 2^24 entries would need more than a
/// 2 GiB binding.
pub const HIGH_TABLE_BITS: u32 = 21;

/// Power tables of one domain size: for each base b, lo[k] = b^k (k < 2^split) and
/// hi[k] = b^(k·2^split) (k < 2^(log_n - split)); then 1/n, then 1/(n·Z(g)) =
/// 1/(n·(g^n - 1)) for the H step.
pub struct DomainTables {
    pub buffer: wgpu::Buffer,
    pub split: u32,
    pub stride: u32,
    /// Index of 1/n.
    pub minv: u32,
    /// Index of 1/(n·Z(g)).
    pub h_factor: u32,
    /// Its bytes in the VRAM budget, while it lives.
    _budget: Option<Reservation>,
}

impl DomainTables {
    /// The tables of 2^log_n, the high parts at most 2^high_bits entries long and shorter
    /// where the tables would not fit `binding_limit` bytes.
    /// Counted against `pool`'s budget when given.
    pub fn new(
        gpu: &GpuContext,
        pool: Option<&BufferPool>,
        log_n: u32,
        high_bits: u32,
        binding_limit: u64,
    ) -> Result<Self> {
        let mut omega = Scalar::ROOT_OF_UNITY;
        for _ in log_n..Scalar::S {
            omega = omega.square();
        }
        let inverse = |x: Scalar| Option::<Scalar>::from(x.invert()).expect("nonzero");
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let bases = [omega, inverse(omega), g, inverse(g)];
        let high = high_bits_within(log_n, high_bits, binding_limit);
        let split = log_n - high;
        let (lo_len, hi_len) = (1usize << split, 1usize << (log_n - split));
        // In blocks, each from its own power, on every core: 2^21 products a base in series
        // would hold up the first transform of a size.
        const BLOCK: usize = 1 << 12;
        let powers = |b: Scalar, count: usize| -> Vec<Scalar> {
            (0..count.div_ceil(BLOCK))
                .into_par_iter()
                .flat_map_iter(|k| {
                    let first = b.pow_vartime([(k * BLOCK) as u64]);
                    std::iter::successors(Some(first), move |p| Some(*p * b))
                        .take(BLOCK.min(count - k * BLOCK))
                })
                .collect()
        };
        let mut table = Vec::with_capacity(table_len(log_n, high));
        for b in bases {
            table.extend(powers(b, lo_len));
            table.extend(powers(b.pow_vartime([lo_len as u64]), hi_len));
        }
        let n = Scalar::from(1u64 << log_n);
        let minv = table.len() as u32;
        table.push(inverse(n));
        let h_factor = table.len() as u32;
        table.push(inverse(n * (g.pow_vartime([1u64 << log_n]) - Scalar::ONE)));
        debug_assert_eq!(
            table.len(),
            table_len(log_n, high),
            "table_bytes counts these"
        );
        let bytes = Scalar::as_bytes(&table);
        let budget = pool
            .map(|pool| pool.reserve("the NTT's power tables", bytes.len() as u64))
            .transpose()?;
        Ok(DomainTables {
            buffer: gpu.storage_buffer("ntt power tables", bytes)?,
            _budget: budget,
            split,
            stride: (lo_len + hi_len) as u32,
            minv,
            h_factor,
        })
    }
}

/// Entries of the tables of 2^log_n whose high parts hold 2^high entries (high <= log_n):
/// four bases' low and high parts, then the two factors.
fn table_len(log_n: u32, high: u32) -> usize {
    4 * ((1usize << high) + (1usize << (log_n - high))) + 2
}

/// Bytes of [`table_len`] entries.
pub(super) fn table_bytes(log_n: u32, high: u32) -> u64 {
    (table_len(log_n, high) * std::mem::size_of::<Scalar>()) as u64
}

/// The most high bits, up to `wanted`, whose tables of 2^log_n fit `limit` bytes (`wanted`,
/// capped at log_n, where none fits: the upload then says what the binding needs).
pub(super) fn high_bits_within(log_n: u32, wanted: u32, limit: u64) -> u32 {
    let wanted = wanted.min(log_n);
    (log_n.div_ceil(2)..=wanted)
        .rev()
        .find(|&high| table_bytes(log_n, high) <= limit)
        .unwrap_or(wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn high_parts_shrink_to_fit_the_binding() {
        // 2^27 under a 2 GiB binding less 4 bytes (wgpu's cap): 2^21 as asked; 2^24 would
        // need 2 GiB.
        assert_eq!(high_bits_within(27, HIGH_TABLE_BITS, 2 * GIB - 4), 21);
        assert_eq!(high_bits_within(27, 24, 2 * GIB - 4), 23);
        // A 128 MiB binding: 2^20 high entries are 128 MiB with nothing left for the rest.
        assert_eq!(high_bits_within(27, HIGH_TABLE_BITS, 128 << 20), 19);
        for (log_n, wanted, limit) in [(27, 21, 128 << 20), (20, 21, 1 << 20), (12, 3, 4096)] {
            let high = high_bits_within(log_n, wanted, limit);
            assert!(high <= wanted.min(log_n));
            let fits = |h| table_bytes(log_n, h) <= limit;
            assert!(fits(high) || high == wanted.min(log_n), "2^{log_n}: {high}");
            assert!(
                high == wanted.min(log_n) || !fits(high + 1),
                "2^{log_n}: {high}"
            );
        }
        // Small sizes take one high part of every power (no products).
        assert_eq!(high_bits_within(16, HIGH_TABLE_BITS, 2 * GIB), 16);
    }
}
