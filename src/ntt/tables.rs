//! Power tables of one domain size, cached per size by the kernels.

use blstrs::Scalar;
use ff::{Field, PrimeField};

use crate::error::Result;
use crate::field::GpuField;
use crate::gpu::GpuContext;

/// Bases whose powers the kernels take from tables, in table order.
pub const OMEGA: usize = 0;
pub const OMEGA_INV: usize = 1;
pub const COSET: usize = 2;
pub const COSET_INV: usize = 3;

/// Power tables of one domain size: for each base b, lo[k] = b^k (k < 2^split) and
/// hi[k] = b^(k·2^split); then 1/n, then 1/(n·Z(g)) = 1/(n·(g^n - 1)) for the H step.
pub struct DomainTables {
    pub buffer: wgpu::Buffer,
    pub split: u32,
    pub stride: u32,
    /// Index of 1/n.
    pub minv: u32,
    /// Index of 1/(n·Z(g)).
    pub h_factor: u32,
}

impl DomainTables {
    pub fn new(gpu: &GpuContext, log_n: u32) -> Result<Self> {
        let mut omega = Scalar::ROOT_OF_UNITY;
        for _ in log_n..Scalar::S {
            omega = omega.square();
        }
        let inverse = |x: Scalar| Option::<Scalar>::from(x.invert()).expect("nonzero");
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let bases = [omega, inverse(omega), g, inverse(g)];
        let split = log_n / 2;
        let (lo_len, hi_len) = (1usize << split, 1usize << (log_n - split));
        let powers = |b: Scalar, count: usize| -> Vec<Scalar> {
            std::iter::successors(Some(Scalar::ONE), |p| Some(*p * b))
                .take(count)
                .collect()
        };
        let mut table = Vec::with_capacity(4 * (lo_len + hi_len) + 1);
        for b in bases {
            table.extend(powers(b, lo_len));
            table.extend(powers(b.pow_vartime([lo_len as u64]), hi_len));
        }
        let minv = table.len() as u32;
        table.push(inverse(Scalar::from(1u64 << log_n)));
        let h_factor = table.len() as u32;
        let n = Scalar::from(1u64 << log_n);
        table.push(inverse(n * (g.pow_vartime([1u64 << log_n]) - Scalar::ONE)));
        Ok(DomainTables {
            buffer: gpu.storage_buffer("ntt power tables", Scalar::as_bytes(&table))?,
            split,
            stride: (lo_len + hi_len) as u32,
            minv,
            h_factor,
        })
    }
}
