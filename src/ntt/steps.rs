//! The dispatches of a transform over a vector in parts: which entry point, with which
//! parameters, over which parts.

use super::program::{NttEntry, NttParams};
use super::tables::{DomainTables, COSET, COSET_INV, OMEGA, OMEGA_INV};
use super::NttOp;

/// Which buffers one dispatch binds: `data`, and `partner` / H-step vectors where used.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum Binds {
    Part(usize),
    Pair(usize, usize),
    HCombine(usize),
}

/// One dispatch.
#[derive(Clone, Copy)]
pub struct Step {
    pub entry: NttEntry,
    pub params: NttParams,
    pub binds: Binds,
}

/// How a vector is laid out and which stage kernel runs inside parts.
#[derive(Clone, Copy)]
pub struct Layout {
    pub log_n: u32,
    pub part_bits: u32,
    /// Stages per `ButterfliesLocal` pass; 0 runs `Butterflies`, one stage a pass.
    pub local_bits: u32,
}

/// Appends the dispatches of `op` over a vector of 2^log_n elements in 2^part_bits parts.
pub fn transform_steps(tables: &DomainTables, layout: Layout, op: NttOp, steps: &mut Vec<Step>) {
    let push = |steps: &mut Vec<Step>, entry, params, binds| {
        steps.push(Step {
            entry,
            params,
            binds,
        })
    };
    let Layout {
        log_n,
        part_bits,
        local_bits,
    } = layout;
    let parts = 1u32 << part_bits;
    let part_len = 1u32 << (log_n - part_bits);
    let base_params = |base: usize, part: u32| NttParams {
        n: 1 << log_n,
        log_n,
        table: base as u32 * tables.stride,
        split: tables.split,
        factor: tables.minv,
        count: part_len,
        first: part * part_len,
        part_bits,
        part,
        ..Default::default()
    };
    let per_part = |steps: &mut Vec<Step>, entry, base| {
        for p in 0..parts {
            push(steps, entry, base_params(base, p), Binds::Part(p as usize));
        }
    };
    let transform = |steps: &mut Vec<Step>, base: usize| {
        // Bit reversal: every pair of parts (p, q), p <= q, swaps the elements between them.
        for p in 0..parts {
            for q in p..parts {
                let params = NttParams {
                    count: part_len >> part_bits,
                    partner_part: q,
                    ..base_params(base, p)
                };
                let binds = if p == q {
                    Binds::Part(p as usize)
                } else {
                    Binds::Pair(p as usize, q as usize)
                };
                push(steps, NttEntry::BitReverse, params, binds);
            }
        }
        // Stages within a part: local_bits at a time in workgroup memory, or one at a time.
        let part_log = log_n - part_bits;
        let mut s = 0;
        while s < part_log && local_bits == 0 {
            for p in 0..parts {
                let params = NttParams {
                    half: 1 << s,
                    count: part_len / 2,
                    ..base_params(base, p)
                };
                push(
                    steps,
                    NttEntry::Butterflies,
                    params,
                    Binds::Part(p as usize),
                );
            }
            s += 1;
        }
        while s < part_log {
            let stages = local_bits.min(part_log - s);
            for p in 0..parts {
                let params = NttParams {
                    stage: s,
                    stages,
                    count: part_len >> stages,
                    ..base_params(base, p)
                };
                push(
                    steps,
                    NttEntry::ButterfliesLocal,
                    params,
                    Binds::Part(p as usize),
                );
            }
            s += stages;
        }
        // Stages whose pairs lie in two parts, one at a time.
        for s in part_log..log_n {
            let half = 1u32 << s;
            let apart = half / part_len;
            for p in (0..parts).filter(|p| p % (2 * apart) < apart) {
                let params = NttParams {
                    half,
                    ..base_params(base, p)
                };
                let binds = Binds::Pair(p as usize, (p + apart) as usize);
                push(steps, NttEntry::ButterfliesAcrossParts, params, binds);
            }
        }
    };
    match op {
        NttOp::Forward => transform(steps, OMEGA),
        NttOp::Inverse | NttOp::CosetInverse => {
            transform(steps, OMEGA_INV);
            per_part(steps, NttEntry::Scale, OMEGA);
            if op == NttOp::CosetInverse {
                per_part(steps, NttEntry::DistributePowers, COSET_INV);
            }
        }
        NttOp::CosetForward => {
            per_part(steps, NttEntry::DistributePowers, COSET);
            transform(steps, OMEGA);
        }
    }
}
