//! Built-in circuits for tests, the demo and benchmarks.
//!
//! Each holds its witness as `Option`s: the `blank` form (no witness) is what parameter
//! generation synthesizes, the other form what the prover does, and both make the same
//! constraints. A blank circuit fails in the prover with `SynthesisError::AssignmentMissing`.
//! [`public_inputs`](super::synthesis::public_inputs) gives what a verifier needs.
//! [`SizeBounds`] says how large a circuit is before it is built, so that a size too large
//! for the machine or for a parameter file is refused before synthesis allocates anything.

use std::ops::{Range, RangeInclusive};

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::{multipack, sha256::sha256};
use bellperson::{Circuit, ConstraintSystem, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

use crate::recorded::CircuitParts;
use crate::{Error, Result};

/// A witness value, or the error a blank circuit answers with.
fn known(value: Option<Scalar>) -> Result<Scalar, SynthesisError> {
    value.ok_or(SynthesisError::AssignmentMissing)
}

/// The largest NTT domain over BLS12-381's Fr (its two-adicity): no circuit of more
/// constraints can be proved.
pub const MAX_LOG_DOMAIN: u32 = 32;

/// Bounds on a circuit's size, known before it is synthesized: exact where the circuit's
/// structure gives the counts, a range where they depend on gadget details (SHA-256). Counts
/// are `u64` so that any requested size can be stated, however absurd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeBounds {
    /// Constraints, the prover's `input * 0 = 0` ones included.
    pub constraints: RangeInclusive<u64>,
    /// Public inputs, ONE included.
    pub inputs: u64,
    /// Auxiliary (private) variables.
    pub aux: RangeInclusive<u64>,
}

impl SizeBounds {
    /// Exactly these counts.
    pub fn exact(constraints: u64, inputs: u64, aux: u64) -> Self {
        SizeBounds {
            constraints: constraints..=constraints,
            inputs,
            aux: aux..=aux,
        }
    }

    /// The NTT domain sizes the circuit may need (powers of two).
    pub fn domains(&self) -> RangeInclusive<u64> {
        self.constraints.start().next_power_of_two()..=self.constraints.end().next_power_of_two()
    }

    /// Refuses a circuit whose smallest possible domain exceeds 2^[`MAX_LOG_DOMAIN`].
    pub fn check_domain(&self, circuit: &str) -> Result<()> {
        let least = *self.constraints.start();
        if least > 1 << MAX_LOG_DOMAIN {
            return Err(Error::InvalidInput(format!(
                "{circuit} has at least {least} constraints, more than the largest domain \
                 BLS12-381 offers (2^{MAX_LOG_DOMAIN})"
            )));
        }
        Ok(())
    }
}

/// Knowledge of a message whose SHA-256 digest is the public input, packed into two field
/// elements as Zcash does. A real gadget circuit: about 27,000 constraints per 64-byte block,
/// almost all of them on bits.
#[derive(Clone, Debug)]
pub struct Sha256Preimage {
    preimage: Option<Vec<u8>>,
    len_bytes: usize,
}

impl Sha256Preimage {
    pub fn new(message: &[u8]) -> Self {
        Self {
            preimage: Some(message.to_vec()),
            len_bytes: message.len(),
        }
    }

    pub fn blank(len_bytes: usize) -> Self {
        Self {
            preimage: None,
            len_bytes,
        }
    }

    /// The size of the circuit for this message length: one aux variable and one booleanity
    /// constraint per message bit, and per 64-byte block of the padded message (length + 9
    /// bytes, rounded up) what bellperson's gadget spends, measured from 19,043 to about
    /// 26,200 variables, fewer the more of the block is constant padding (an empty message
    /// costs nothing). The bounds keep a margin beyond those extremes and count nothing for
    /// the first block; `tests/synthesis.rs` checks them against synthesis.
    pub fn size_bounds(&self) -> SizeBounds {
        const LEAST_PER_LATER_BLOCK: u64 = 16_000;
        const MOST_PER_BLOCK: u64 = 28_000;
        // ONE and the digest packed into two field elements, each with its input constraint.
        const INPUTS: u64 = 3;
        let bits = 8 * self.len_bytes as u64;
        let blocks = (self.len_bytes as u64 + 9).div_ceil(64);
        let aux = bits + LEAST_PER_LATER_BLOCK * (blocks - 1)..=bits + MOST_PER_BLOCK * blocks;
        SizeBounds {
            // The digest's two packing constraints and the inputs' own.
            constraints: aux.start() + 2 + INPUTS..=aux.end() + 2 + INPUTS,
            inputs: INPUTS,
            aux,
        }
    }
}

impl Circuit<Scalar> for Sha256Preimage {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut bits = Vec::with_capacity(self.len_bytes * 8);
        for i in 0..self.len_bytes {
            let byte = self.preimage.as_ref().map(|message| message[i]);
            // The gadget reads each byte most significant bit first.
            for bit in (0..8).rev() {
                let value = byte.map(|byte| (byte >> bit) & 1 == 1);
                let name = || format!("preimage byte {i} bit {bit}");
                bits.push(Boolean::from(AllocatedBit::alloc(
                    cs.namespace(name),
                    value,
                )?));
            }
        }
        let digest = sha256(cs.namespace(|| "sha256"), &bits)?;
        multipack::pack_into_inputs(cs.namespace(|| "digest"), &digest)
    }
}

/// `count` public inputs x_i, each squared (x_i * x_i = y_i) and multiplied into a running
/// product, so that inputs occur in both the A and the B query.
#[derive(Clone, Debug)]
pub struct ManyInputs {
    values: Option<Vec<Scalar>>,
    count: usize,
}

impl ManyInputs {
    pub fn new(values: Vec<Scalar>) -> Self {
        Self {
            count: values.len(),
            values: Some(values),
        }
    }

    pub fn blank(count: usize) -> Self {
        Self {
            values: None,
            count,
        }
    }
}

impl Circuit<Scalar> for ManyInputs {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut product = (CS::one(), Some(Scalar::ONE));
        for i in 0..self.count {
            let x = self.values.as_ref().map(|values| values[i]);
            let x_var = cs.alloc_input(|| format!("x{i}"), || known(x))?;
            let square = x.map(|x| x.square());
            let square_var = cs.alloc(|| format!("x{i}^2"), || known(square))?;
            cs.enforce(
                || format!("x{i} * x{i} = x{i}^2"),
                |lc| lc + x_var,
                |lc| lc + x_var,
                |lc| lc + square_var,
            );
            let next = product.1.zip(x).map(|(p, x)| p * x);
            let next_var = cs.alloc(|| format!("product {i}"), || known(next))?;
            cs.enforce(
                || format!("multiply x{i} into the product"),
                |lc| lc + product.0,
                |lc| lc + x_var,
                |lc| lc + next_var,
            );
            product = (next_var, next);
        }
        Ok(())
    }
}

/// A witness almost all 0/1: `count` boolean-constrained bits, packed 64 at a time into
/// numbers multiplied into a running product (full-width from the fourth chunk on), which
/// is the one public input. Exercises the MSM's small-scalar paths.
#[derive(Clone, Debug)]
pub struct BitsHeavy {
    bits: Option<Vec<bool>>,
    count: usize,
}

impl BitsHeavy {
    pub fn new(bits: Vec<bool>) -> Self {
        Self {
            count: bits.len(),
            bits: Some(bits),
        }
    }

    pub fn blank(count: usize) -> Self {
        Self { bits: None, count }
    }
}

impl Circuit<Scalar> for BitsHeavy {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut vars = Vec::with_capacity(self.count);
        for i in 0..self.count {
            let value = self.bits.as_ref().map(|bits| bits[i]);
            // Enforces (1 - b) * b = 0.
            vars.push(AllocatedBit::alloc(
                cs.namespace(|| format!("bit {i}")),
                value,
            )?);
        }
        let mut product = (CS::one(), Some(Scalar::ONE));
        for (chunk, bits) in vars.chunks(64).enumerate() {
            let mut packed = LinearCombination::zero();
            let mut packed_value = Some(0u64);
            for (i, bit) in bits.iter().enumerate() {
                packed = packed + (Scalar::from(1u64 << i), bit.get_variable());
                packed_value = packed_value
                    .zip(bit.get_value())
                    .map(|(v, b)| v | (u64::from(b) << i));
            }
            let next = product
                .1
                .zip(packed_value)
                .map(|(p, v)| p * Scalar::from(v));
            let next_var = cs.alloc(|| format!("product {chunk}"), || known(next))?;
            cs.enforce(
                || format!("multiply chunk {chunk} into the product"),
                |lc| lc + product.0,
                |_| packed,
                |lc| lc + next_var,
            );
            product = (next_var, next);
        }
        let out = cs.alloc_input(|| "product", || known(product.1))?;
        cs.enforce(
            || "product is public",
            |lc| lc + product.0,
            |lc| lc + CS::one(),
            |lc| lc + out,
        );
        Ok(())
    }
}

/// The smallest circuit: x * y = z with z public.
#[derive(Clone, Debug)]
pub struct SingleConstraint {
    x: Option<Scalar>,
    y: Option<Scalar>,
}

impl SingleConstraint {
    pub fn new(x: Scalar, y: Scalar) -> Self {
        Self {
            x: Some(x),
            y: Some(y),
        }
    }

    pub fn blank() -> Self {
        Self { x: None, y: None }
    }
}

impl Circuit<Scalar> for SingleConstraint {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x = cs.alloc(|| "x", || known(self.x))?;
        let y = cs.alloc(|| "y", || known(self.y))?;
        let z_value = self.x.zip(self.y).map(|(x, y)| x * y);
        let z = cs.alloc_input(|| "z", || known(z_value))?;
        cs.enforce(|| "x * y = z", |lc| lc + x, |lc| lc + y, |lc| lc + z);
        Ok(())
    }
}

/// How a [`FilecoinLike`] circuit's aux values are drawn: what its L, A and B MSMs sum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AuxMix {
    /// Half the aux values random bits, half full width (the MSMs near their uniform cost).
    #[default]
    HalfBits,
    /// The aux values of the real 2 KiB PoRep partition (filecoin-proofs, 2,685,673
    /// values): 51.2% zeros, 47.2% ones, 1.6% full width; and the real 32 GiB partition's
    /// B query density, a quarter of its aux variables. Here 59 of every 60 aux values are
    /// bits or copies of bits, 48% of the bits ones (51.1% zeros, 47.2% ones, 1.7% full
    /// width), and about one in four aux variables is in the B query.
    Porep,
}

impl AuxMix {
    pub const ALL: [AuxMix; 2] = [AuxMix::HalfBits, AuxMix::Porep];

    pub fn name(self) -> &'static str {
        match self {
            AuxMix::HalfBits => "half-bits",
            AuxMix::Porep => "porep",
        }
    }

    /// What a chain's step `t` (counted from the chain's first) allocates.
    fn step(self, t: usize) -> ChainStep {
        match self {
            AuxMix::HalfBits => ChainStep::Grow,
            AuxMix::Porep if t % POREP_STEPS_PER_VALUE == POREP_STEPS_PER_VALUE - 1 => {
                ChainStep::Grow
            }
            AuxMix::Porep if t.is_multiple_of(2) => ChainStep::BitAndCopy,
            AuxMix::Porep => ChainStep::Copies,
        }
    }

    /// One seeded bit: a fair coin for `HalfBits`, one 48% of the time for `Porep` (the
    /// real partition's ones among its bits).
    fn bit(self, rng: &mut ChaCha20Rng) -> Scalar {
        let one = match self {
            AuxMix::HalfBits => rng.next_u32() & 1 == 1,
            AuxMix::Porep => rng.next_u32() % 1000 < 480,
        };
        Scalar::from(u64::from(one))
    }
}

/// `AuxMix::Porep`'s steps per full-width value: 60 aux values, one of them full width.
const POREP_STEPS_PER_VALUE: usize = 30;

/// One step of a [`FilecoinLike`] chain: two constraints, two aux variables.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ChainStep {
    /// A bit, and the chain's full-width value grown by it.
    Grow,
    /// A bit, and a copy of it: `b * ONE = c` (the copy is in neither the B query nor,
    /// until copied, the A query).
    BitAndCopy,
    /// Two copies of the chain's latest bit or copy.
    Copies,
}

fn allocate_bit<CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    name: String,
    value: Option<Scalar>,
) -> Result<Variable, SynthesisError> {
    let bit = cs.alloc(|| name.clone(), || known(value))?;
    cs.enforce(
        || format!("{name} is a bit"),
        |lc| lc + bit,
        |lc| lc + CS::one() - bit,
        |lc| lc,
    );
    Ok(bit)
}

fn allocate_copy<CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    name: String,
    of: Variable,
    value: Option<Scalar>,
) -> Result<Variable, SynthesisError> {
    let copy = cs.alloc(|| name.clone(), || known(value))?;
    cs.enforce(
        || format!("{name} is a copy"),
        |lc| lc + of,
        |lc| lc + CS::one(),
        |lc| lc + copy,
    );
    Ok(copy)
}

impl std::str::FromStr for AuxMix {
    type Err = String;

    fn from_str(name: &str) -> std::result::Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|mix| mix.name() == name)
            .ok_or_else(|| format!("{name:?}: expected half-bits or porep"))
    }
}

/// A benchmark circuit of exactly 2^k - 1 constraints once the prover's input constraints are
/// added (so its NTT domain is 2^k), with a witness like Filecoin's: bits and full-width
/// field elements grown from seeded ChaCha values, half of each by default, or in the real
/// PoRep partition's proportions ([`AuxMix`]).
///
/// Four random public inputs p_0..p_3; then, like a Filecoin partition's challenges, 16
/// independent chains, chain c from w = p_(c mod 4) + c + 1 (a combination of inputs, not
/// a variable: the aux count stays 2^k - 6, within a parameter file's 32-bit counts at
/// 2^32), each with its share of 2^(k-1) - 3 steps of
///
/// ```text
/// b * (1 - b) = 0                    (a random bit)
/// (w + b) * (p_(j mod 4) + b) = w'   (the next full-width value; j counts every chain's steps)
/// ```
///
/// With [`AuxMix::Porep`] only one step in 30 grows w; the others alternate between a bit
/// and a copy of it (`b * ONE = c`) and two more copies, so that the B query holds about a
/// quarter of the aux variables, as the real partition's does.
///
/// Bits occur in the B query, the w's do not: the B aux density is about half, like the
/// sparse B queries of real circuits. The chains read only the inputs, so the witness can
/// be computed in parts ([`FilecoinLike::in_parts`]).
#[derive(Clone, Debug)]
pub struct FilecoinLike {
    log_constraints: u32,
    seed: Option<u64>,
    mix: AuxMix,
    /// The chains this circuit (or part of one) allocates after the inputs.
    chains: Range<usize>,
}

const FILECOIN_LIKE_INPUTS: usize = 4;
const FILECOIN_LIKE_CHAINS: usize = 16;

impl FilecoinLike {
    /// Smallest size whose steps use every public input.
    pub const MIN_LOG_CONSTRAINTS: u32 = 4;
    pub const MAX_LOG_CONSTRAINTS: u32 = MAX_LOG_DOMAIN;

    /// The circuit of 2^`log_constraints` - 1 constraints, its witness drawn from `seed`.
    pub fn new(log_constraints: u32, seed: u64) -> Result<Self> {
        Self::check(log_constraints)?;
        Ok(Self {
            log_constraints,
            seed: Some(seed),
            mix: AuxMix::default(),
            chains: 0..FILECOIN_LIKE_CHAINS,
        })
    }

    pub fn blank(log_constraints: u32) -> Result<Self> {
        Self::check(log_constraints)?;
        Ok(Self {
            log_constraints,
            seed: None,
            mix: AuxMix::default(),
            chains: 0..FILECOIN_LIKE_CHAINS,
        })
    }

    /// The same circuit with its aux values drawn as `mix` says: another constraint system
    /// (its parameters and recorded matrices are its own).
    pub fn with_mix(self, mix: AuxMix) -> Self {
        Self { mix, ..self }
    }

    fn check(log_constraints: u32) -> Result<()> {
        if (Self::MIN_LOG_CONSTRAINTS..=Self::MAX_LOG_CONSTRAINTS).contains(&log_constraints) {
            Ok(())
        } else {
            Err(Error::InvalidInput(format!(
                "a FilecoinLike circuit has 2^{}..=2^{} constraints, not 2^{log_constraints}",
                Self::MIN_LOG_CONSTRAINTS,
                Self::MAX_LOG_CONSTRAINTS
            )))
        }
    }

    /// The circuit's witness in at most `parts` parts (at least one): the inputs, then
    /// groups of whole chains.
    pub fn in_parts(self, parts: usize) -> CircuitParts<Self> {
        let (first, end) = (self.chains.start, self.chains.end);
        let parts = parts.clamp(1, (end - first).max(1));
        let of = |range| Self {
            chains: range,
            ..self.clone()
        };
        CircuitParts {
            prefix: of(first..first),
            parts: (0..parts)
                .map(|k| {
                    of(first + (end - first) * k / parts..first + (end - first) * (k + 1) / parts)
                })
                .collect(),
        }
    }

    /// Two constraints a step, and the prover adds one per input, ONE included: 5. Since
    /// 2^k - 1 - 5 is even, whole steps fill 2^k - 1 exactly.
    fn steps(&self) -> usize {
        ((1usize << self.log_constraints) - 1 - (FILECOIN_LIKE_INPUTS + 1)) / 2
    }

    /// Steps of the chains before `chain`: each has an equal share, the first ones one more.
    fn steps_before(&self, chain: usize) -> usize {
        let steps = self.steps();
        chain * (steps / FILECOIN_LIKE_CHAINS) + chain.min(steps % FILECOIN_LIKE_CHAINS)
    }

    /// The exact size: 2^k - 1 constraints, ONE and four inputs, two variables a step.
    pub fn size_bounds(&self) -> SizeBounds {
        let constraints = (1u64 << self.log_constraints) - 1;
        let inputs = FILECOIN_LIKE_INPUTS as u64 + 1;
        let steps = (constraints - inputs) / 2;
        SizeBounds::exact(constraints, inputs, 2 * steps)
    }
}

impl Circuit<Scalar> for FilecoinLike {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        // Stream 0 draws the inputs, stream c + 1 chain c: a part draws its chains' values
        // without drawing the others'.
        let rng_of = |stream: usize| {
            self.seed.map(|seed| {
                let mut rng = ChaCha20Rng::seed_from_u64(seed);
                rng.set_stream(stream as u64);
                rng
            })
        };
        let mut rng = rng_of(0);
        let mut inputs = [(CS::one(), None); FILECOIN_LIKE_INPUTS];
        for (i, input) in inputs.iter_mut().enumerate() {
            let value = rng.as_mut().map(Scalar::random);
            *input = (cs.alloc_input(|| format!("p{i}"), || known(value))?, value);
        }
        for chain in self.chains.clone() {
            let mut rng = rng_of(chain + 1);
            let (start, start_value) = inputs[chain % FILECOIN_LIKE_INPUTS];
            let offset = Scalar::from(chain as u64 + 1);
            let mut w_value = start_value.map(|p| p + offset);
            let mut w = LinearCombination::zero() + start + (offset, CS::one());
            let first = self.steps_before(chain);
            // The chain's latest bit or copy of one, which copy steps copy.
            let mut latest = None;
            for j in first..self.steps_before(chain + 1) {
                let step = self.mix.step(j - first);
                if let (ChainStep::Copies, Some((of, value))) = (step, latest) {
                    let copy = allocate_copy(cs, format!("c{j}"), of, value)?;
                    let copy = allocate_copy(cs, format!("d{j}"), copy, value)?;
                    latest = Some((copy, value));
                    continue;
                }
                let bit_value = rng.as_mut().map(|rng| self.mix.bit(rng));
                let bit = allocate_bit(cs, format!("b{j}"), bit_value)?;
                if step != ChainStep::Grow {
                    let copy = allocate_copy(cs, format!("c{j}"), bit, bit_value)?;
                    latest = Some((copy, bit_value));
                    continue;
                }
                let (p, p_value) = inputs[j % FILECOIN_LIKE_INPUTS];
                let next_value = w_value
                    .zip(bit_value)
                    .zip(p_value)
                    .map(|((w, b), p)| (w + b) * (p + b));
                let next = cs.alloc(|| format!("w{j}"), || known(next_value))?;
                cs.enforce(
                    || format!("w{j} = (w + b{j}) * (p + b{j})"),
                    |lc| lc + &w + bit,
                    |lc| lc + p + bit,
                    |lc| lc + next,
                );
                (w, w_value) = (LinearCombination::zero() + next, next_value);
            }
        }
        Ok(())
    }
}
