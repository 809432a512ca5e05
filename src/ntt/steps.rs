//! The dispatches of a transform over a vector in parts: which entry point, with which
//! parameters, over which parts.

use super::program::{NttEntry, NttParams};
use super::tables::{DomainTables, COSET, COSET_INV, OMEGA, OMEGA_INV};
use super::{LaterPasses, NttOp, StagePasses};

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
    pub passes: StagePasses,
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
        passes,
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
        // Stages within a part: a first workgroup-memory pass (contiguous blocks), then the
        // later passes.
        let part_log = log_n - part_bits;
        let mut s = 0;
        while s < part_log {
            let left = part_log - s;
            let first = s == 0 && passes.local > 0;
            let (entry, stages) = match passes.later {
                _ if first => (NttEntry::ButterfliesLocal, passes.local.min(left)),
                LaterPasses::Local if passes.local > 0 => {
                    (NttEntry::ButterfliesLocal, passes.local.min(left))
                }
                LaterPasses::Radix8 if left >= 3 => (NttEntry::ButterfliesRadix8, 3),
                LaterPasses::Radix4 if left >= 2 => (NttEntry::ButterfliesRadix4, 2),
                _ => (NttEntry::Butterflies, 1),
            };
            for p in 0..parts {
                let count = match entry {
                    NttEntry::Butterflies => part_len / 2,
                    _ => part_len >> stages,
                };
                let params = NttParams {
                    half: 1 << s,
                    stage: s,
                    stages,
                    count,
                    ..base_params(base, p)
                };
                push(steps, entry, params, Binds::Part(p as usize));
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
