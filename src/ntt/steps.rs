//! The dispatches of a transform over a vector in parts: which entry point, with which
//! parameters, over which parts.

use super::program::{Decimation, NttEntry, NttParams, Stages};
use super::tables::{DomainTables, COSET, COSET_INV, OMEGA, OMEGA_INV};
use super::{LaterPasses, NttOp, StagePasses};

/// Which buffers one dispatch binds: `data`, and `partner` / H-step vectors where used.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum Binds {
    Part(usize),
    Pair(usize, usize),
    /// Part p of a, with part p of b and of c (the H step's vectors).
    HStep(usize),
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

/// The order a transform's stages run in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    /// Decimation in time, from natural order (a bit reversal first) or from bit-reversed
    /// order: natural order out.
    Time { bit_reverse: bool },
    /// Decimation in frequency: natural order in, bit-reversed order out, no bit reversal.
    Frequency,
}

/// Appends the dispatches of `op` over a vector of 2^log_n elements in 2^part_bits parts.
pub fn transform_steps(tables: &DomainTables, layout: Layout, op: NttOp, steps: &mut Vec<Step>) {
    let plan = Plan::new(tables, layout);
    let natural = Order::Time { bit_reverse: true };
    match op {
        NttOp::Forward => plan.transform(steps, OMEGA, natural),
        NttOp::Inverse => {
            plan.transform(steps, OMEGA_INV, natural);
            plan.per_part(steps, NttEntry::Scale, OMEGA, Powers::default());
        }
        NttOp::CosetInverse => {
            plan.transform(steps, OMEGA_INV, natural);
            let scaled = Powers {
                scaled: true,
                ..Powers::default()
            };
            plan.per_part(steps, NttEntry::DistributePowers, COSET_INV, scaled);
        }
        NttOp::CosetForward => {
            plan.per_part(steps, NttEntry::DistributePowers, COSET, Powers::default());
            plan.transform(steps, OMEGA, natural);
        }
    }
}

/// Appends the dispatches of `ifft` then `coset_fft` (the H step's way from evaluations on
/// the domain to evaluations on the coset) without a bit reversal: the inverse transform in
/// frequency leaves the coefficients in bit-reversed order, where they are scaled by 1/n and
/// g^k, and the forward transform in time starts from that order.
pub fn to_coset_steps(tables: &DomainTables, layout: Layout, steps: &mut Vec<Step>) {
    let plan = Plan::new(tables, layout);
    plan.transform(steps, OMEGA_INV, Order::Frequency);
    let powers = Powers {
        bit_reversed: true,
        scaled: true,
    };
    plan.per_part(steps, NttEntry::DistributePowers, COSET, powers);
    plan.transform(steps, OMEGA, Order::Time { bit_reverse: false });
}

/// Appends the dispatches that take c, evaluations on the domain, to n times its
/// coefficients in bit-reversed order: an inverse transform in frequency, unscaled. The H step
/// needs c only as coefficients ([`h_steps`]).
pub fn unscaled_coefficients_steps(tables: &DomainTables, layout: Layout, steps: &mut Vec<Step>) {
    Plan::new(tables, layout).transform(steps, OMEGA_INV, Order::Frequency);
}

/// Appends the H step's dispatches after a and b reach the coset ([`to_coset_steps`]) and c
/// its unscaled coefficients ([`unscaled_coefficients_steps`]): a·b, its inverse transform in
/// frequency, then in one pass per part the coset shift g^-k, c's coefficients subtracted and
/// 1/(n·Z) (`ntt_h_finish`), and a bit reversal to natural order. Six transforms in all
/// where bellperson runs seven: c never goes to the coset.
pub fn h_steps(tables: &DomainTables, layout: Layout, steps: &mut Vec<Step>) {
    h_product_steps(tables, layout, steps);
    h_finish_steps(tables, layout, steps);
}

/// The first of [`h_steps`]: a·b into a (the only one that reads b).
pub fn h_product_steps(tables: &DomainTables, layout: Layout, steps: &mut Vec<Step>) {
    Plan::new(tables, layout).h_pass(steps, NttEntry::HProduct, OMEGA);
}

/// The rest of [`h_steps`], after [`h_product_steps`] (the only ones that read c).
pub fn h_finish_steps(tables: &DomainTables, layout: Layout, steps: &mut Vec<Step>) {
    let plan = Plan::new(tables, layout);
    plan.transform(steps, OMEGA_INV, Order::Frequency);
    plan.h_pass(steps, NttEntry::HFinish, COSET_INV);
    plan.bit_reverse(steps);
}

/// How `DistributePowers` multiplies.
#[derive(Clone, Copy, Default)]
struct Powers {
    /// The data is in bit-reversed order.
    bit_reversed: bool,
    /// By 1/n as well.
    scaled: bool,
}

/// The dispatches of transforms over one layout.
struct Plan<'a> {
    tables: &'a DomainTables,
    layout: Layout,
}

impl<'a> Plan<'a> {
    fn new(tables: &'a DomainTables, layout: Layout) -> Self {
        Plan { tables, layout }
    }

    fn parts(&self) -> u32 {
        1 << self.layout.part_bits
    }

    fn part_len(&self) -> u32 {
        1 << (self.layout.log_n - self.layout.part_bits)
    }

    /// The parameters every dispatch over part `part` with powers of `base` shares.
    fn base_params(&self, base: usize, part: u32) -> NttParams {
        let Layout {
            log_n, part_bits, ..
        } = self.layout;
        NttParams {
            n: 1 << log_n,
            log_n,
            table: base as u32 * self.tables.stride,
            split: self.tables.split,
            factor: self.tables.minv,
            count: self.part_len(),
            first: part * self.part_len(),
            part_bits,
            part,
            ..Default::default()
        }
    }

    /// `entry` over every part.
    fn per_part(&self, steps: &mut Vec<Step>, entry: NttEntry, base: usize, powers: Powers) {
        for p in 0..self.parts() {
            let params = NttParams {
                bit_reversed: u32::from(powers.bit_reversed),
                scaled: u32::from(powers.scaled),
                ..self.base_params(base, p)
            };
            steps.push(Step {
                entry,
                params,
                binds: Binds::Part(p as usize),
            });
        }
    }

    /// `entry` over every part of a, with b's and c's parts bound beside it; the powers of
    /// `base` and the factor 1/(n·Z) serve `HFinish` (`HProduct` reads neither).
    fn h_pass(&self, steps: &mut Vec<Step>, entry: NttEntry, base: usize) {
        for p in 0..self.parts() {
            let params = NttParams {
                factor: self.tables.h_factor,
                ..self.base_params(base, p)
            };
            steps.push(Step {
                entry,
                params,
                binds: Binds::HStep(p as usize),
            });
        }
    }

    /// Bit reversal: every pair of parts (p, q), p <= q, swaps the elements between them.
    fn bit_reverse(&self, steps: &mut Vec<Step>) {
        let (parts, part_len) = (self.parts(), self.part_len());
        for p in 0..parts {
            for q in p..parts {
                let params = NttParams {
                    count: part_len >> self.layout.part_bits,
                    partner_part: q,
                    ..self.base_params(OMEGA, p)
                };
                let binds = if p == q {
                    Binds::Part(p as usize)
                } else {
                    Binds::Pair(p as usize, q as usize)
                };
                steps.push(Step {
                    entry: NttEntry::BitReverse,
                    params,
                    binds,
                });
            }
        }
    }

    /// The transform with powers of `base` (ω or ω^-1), its stages in `order`.
    fn transform(&self, steps: &mut Vec<Step>, base: usize, order: Order) {
        let Layout {
            log_n,
            part_bits,
            passes,
        } = self.layout;
        let (parts, part_len) = (self.parts(), self.part_len());
        let decimation = match order {
            Order::Time { .. } => Decimation::Time,
            Order::Frequency => Decimation::Frequency,
        };
        let mut stage_steps = Vec::new();
        if order == (Order::Time { bit_reverse: true }) {
            self.bit_reverse(steps);
        }
        // Stages within a part: a first workgroup-memory pass (contiguous blocks), then the
        // later passes; each pass's dispatches over the parts together.
        let part_log = log_n - part_bits;
        let mut s = 0;
        while s < part_log {
            let left = part_log - s;
            let first = s == 0 && passes.local > 0;
            let (kernel, stages) = match passes.later {
                _ if first => (Stages::Local, passes.local.min(left)),
                LaterPasses::Local if passes.local > 0 => (Stages::Local, passes.local.min(left)),
                LaterPasses::Radix8 if left >= 3 => (Stages::Radix8, 3),
                LaterPasses::Radix4 if left >= 2 => (Stages::Radix4, 2),
                _ => (Stages::One, 1),
            };
            let entry = NttEntry::Butterflies(kernel, decimation);
            let pass: Vec<Step> = (0..parts)
                .map(|p| {
                    let count = match kernel {
                        Stages::One => part_len / 2,
                        _ => part_len >> stages,
                    };
                    let params = NttParams {
                        half: 1 << s,
                        stage: s,
                        stages,
                        count,
                        ..self.base_params(base, p)
                    };
                    Step {
                        entry,
                        params,
                        binds: Binds::Part(p as usize),
                    }
                })
                .collect();
            stage_steps.push(pass);
            s += stages;
        }
        // Stages whose pairs lie in two parts, one at a time.
        for s in part_log..log_n {
            let half = 1u32 << s;
            let apart = half / part_len;
            let pass = (0..parts)
                .filter(|p| p % (2 * apart) < apart)
                .map(|p| Step {
                    entry: NttEntry::Butterflies(Stages::AcrossParts, decimation),
                    params: NttParams {
                        half,
                        ..self.base_params(base, p)
                    },
                    binds: Binds::Pair(p as usize, (p + apart) as usize),
                })
                .collect();
            stage_steps.push(pass);
        }
        // In frequency the passes run from the top stage down (each runs its own stages
        // from the top down).
        if order == Order::Frequency {
            stage_steps.reverse();
        }
        steps.extend(stage_steps.into_iter().flatten());
    }
}
