//! Built-in circuits for tests, the demo and benchmarks.
//!
//! Each holds its witness as `Option`s: the `blank` form (no witness) is what parameter
//! generation synthesizes, the other form what the prover does, and both make the same
//! constraints. A blank circuit fails in the prover with `SynthesisError::AssignmentMissing`.
//! [`public_inputs`](super::synthesis::public_inputs) gives what a verifier needs.

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::{multipack, sha256::sha256};
use bellperson::{Circuit, ConstraintSystem, LinearCombination, SynthesisError};
use blstrs::Scalar;
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

use crate::{Error, Result};

/// A witness value, or the error a blank circuit answers with.
fn known(value: Option<Scalar>) -> Result<Scalar, SynthesisError> {
    value.ok_or(SynthesisError::AssignmentMissing)
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

/// A benchmark circuit of exactly 2^k - 1 constraints once the prover's input constraints are
/// added (so its NTT domain is 2^k), with a witness like Filecoin's: half the aux variables
/// bits, the others full-width field elements grown from seeded ChaCha values.
///
/// Four random public inputs p_0..p_3 and a random start w; then 2^(k-1) - 3 steps of
///
/// ```text
/// b * (1 - b) = 0                    (a random bit)
/// (w + b) * (p_(j mod 4) + b) = w'   (the next full-width value)
/// ```
///
/// Bits occur in the B query, the w's do not: the B aux density is about half, like the
/// sparse B queries of real circuits.
#[derive(Clone, Debug)]
pub struct FilecoinLike {
    log_constraints: u32,
    seed: Option<u64>,
}

const FILECOIN_LIKE_INPUTS: usize = 4;

impl FilecoinLike {
    /// Smallest size whose steps use every public input.
    pub const MIN_LOG_CONSTRAINTS: u32 = 4;
    /// BLS12-381's Fr has no larger power-of-two NTT domain.
    pub const MAX_LOG_CONSTRAINTS: u32 = 32;

    /// The circuit of 2^`log_constraints` - 1 constraints, its witness drawn from `seed`.
    pub fn new(log_constraints: u32, seed: u64) -> Result<Self> {
        Self::check(log_constraints)?;
        Ok(Self {
            log_constraints,
            seed: Some(seed),
        })
    }

    pub fn blank(log_constraints: u32) -> Result<Self> {
        Self::check(log_constraints)?;
        Ok(Self {
            log_constraints,
            seed: None,
        })
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

    /// Two constraints a step, and the prover adds one per input, ONE included: 5. Since
    /// 2^k - 1 - 5 is even, whole steps fill 2^k - 1 exactly.
    fn steps(&self) -> usize {
        ((1usize << self.log_constraints) - 1 - (FILECOIN_LIKE_INPUTS + 1)) / 2
    }
}

impl Circuit<Scalar> for FilecoinLike {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let steps = self.steps();
        let mut rng = self.seed.map(ChaCha20Rng::seed_from_u64);
        let mut inputs = [(CS::one(), None); FILECOIN_LIKE_INPUTS];
        for (i, input) in inputs.iter_mut().enumerate() {
            let value = rng.as_mut().map(Scalar::random);
            *input = (cs.alloc_input(|| format!("p{i}"), || known(value))?, value);
        }
        let mut w_value = rng.as_mut().map(Scalar::random);
        let mut w = cs.alloc(|| "w start", || known(w_value))?;
        for j in 0..steps {
            let bit_value = rng
                .as_mut()
                .map(|rng| Scalar::from(u64::from(rng.next_u32() & 1)));
            let bit = cs.alloc(|| format!("b{j}"), || known(bit_value))?;
            cs.enforce(
                || format!("b{j} is a bit"),
                |lc| lc + bit,
                |lc| lc + CS::one() - bit,
                |lc| lc,
            );
            let (p, p_value) = inputs[j % FILECOIN_LIKE_INPUTS];
            let next_value = w_value
                .zip(bit_value)
                .zip(p_value)
                .map(|((w, b), p)| (w + b) * (p + b));
            let next = cs.alloc(|| format!("w{j}"), || known(next_value))?;
            cs.enforce(
                || format!("w{j} = (w + b{j}) * (p + b{j})"),
                |lc| lc + w + bit,
                |lc| lc + p + bit,
                |lc| lc + next,
            );
            (w, w_value) = (next, next_value);
        }
        Ok(())
    }
}
