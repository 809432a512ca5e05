//! Inputs that make field code fail if it can: seeded random elements plus the edge cases
//! carry chains and reductions get wrong (0, 1, p-1, p-2, limb and 2^k boundaries, R mod p,
//! Montgomery forms with all-ones limbs). Used by the tests and by the CLI self-test.

use super::GpuField;
use blstrs::{Fp, Fp2, Scalar};
use ff::Field;
use rand_chacha::rand_core::SeedableRng;

/// A field with a list of edge-case elements.
pub trait SampleField: GpuField + Field {
    fn edge_cases() -> Vec<Self>;
}

/// `n` elements from a seeded generator (the same seed gives the same elements).
pub fn random<F: Field>(seed: u64, n: usize) -> Vec<F> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| F::random(&mut rng)).collect()
}

/// How seeded benchmark scalars are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalarMix {
    /// Every scalar full width.
    Uniform,
    /// Half zeros, 40% ones, 10% full width: bit-heavy witnesses.
    Skewed,
    /// Half random bits, half full width: `FilecoinLike`'s aux values (`AuxMix::HalfBits`).
    HalfBits,
    /// The aux values of the real 2 KiB PoRep partition (filecoin-proofs, 2,685,673 values):
    /// 51.2% zeros, 47.2% ones, 1.6% full width, none in between.
    Porep,
}

impl ScalarMix {
    pub const ALL: [ScalarMix; 4] = [
        ScalarMix::Uniform,
        ScalarMix::Skewed,
        ScalarMix::HalfBits,
        ScalarMix::Porep,
    ];

    /// Zeros and ones per thousand scalars; the rest are full width.
    fn per_thousand(self) -> (u32, u32) {
        match self {
            ScalarMix::Uniform => (0, 0),
            ScalarMix::Skewed => (500, 400),
            ScalarMix::HalfBits => (250, 250),
            ScalarMix::Porep => (512, 472),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ScalarMix::Uniform => "uniform",
            ScalarMix::Skewed => "skewed",
            ScalarMix::HalfBits => "half-bits",
            ScalarMix::Porep => "porep",
        }
    }
}

impl std::str::FromStr for ScalarMix {
    type Err = String;

    fn from_str(name: &str) -> std::result::Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|mix| mix.name() == name)
            .ok_or_else(|| format!("{name:?}: expected uniform, skewed, half-bits or porep"))
    }
}

/// `n` seeded scalars drawn as `mix` says (the same seed gives the same scalars).
pub fn sample_scalars(seed: u64, n: usize, mix: ScalarMix) -> Vec<Scalar> {
    use rand_chacha::rand_core::RngCore;
    use rayon::prelude::*;
    const RUN: usize = 1 << 14;
    let (zeros, ones) = mix.per_thousand();
    let mut out = vec![Scalar::ZERO; n];
    out.par_chunks_mut(RUN).enumerate().for_each(|(k, part)| {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ ((k as u64) << 32));
        for s in part {
            let draw = rng.next_u32() % 1000;
            *s = if draw < zeros {
                Scalar::ZERO
            } else if draw < zeros + ones {
                Scalar::ONE
            } else {
                Scalar::random(&mut rng)
            };
        }
    });
    out
}

/// Operand pairs: every edge case against every edge case, then `random_pairs` random pairs,
/// then each edge case against a random element.
pub fn operand_pairs<F: SampleField>(seed: u64, random_pairs: usize) -> (Vec<F>, Vec<F>) {
    let edges = F::edge_cases();
    let mut lhs = Vec::new();
    let mut rhs = Vec::new();
    for a in &edges {
        for b in &edges {
            lhs.push(*a);
            rhs.push(*b);
        }
    }
    lhs.extend(random::<F>(seed, random_pairs));
    rhs.extend(random::<F>(seed ^ 0x5eed, random_pairs));
    lhs.extend(&edges);
    rhs.extend(random::<F>(seed ^ 0xed9e, edges.len()));
    (lhs, rhs)
}

/// Each element with the modulus added to its prime-field parts: the same values in the
/// form the int64 path's shaders may hold them (Fq below 2p), for tests of that range. The
/// result is only for uploading: blstrs expects its elements below the modulus.
pub fn plus_modulus<F: GpuField>(values: &[F]) -> Vec<F> {
    let mut out = values.to_vec();
    let words: &mut [u32] = bytemuck::cast_slice_mut(F::as_bytes_mut(&mut out));
    for part in words.chunks_exact_mut(F::MODULUS.len()) {
        let mut carry = false;
        for (w, &m) in part.iter_mut().zip(F::MODULUS) {
            let (sum, c1) = w.overflowing_add(m);
            let (sum, c2) = sum.overflowing_add(carry as u32);
            *w = sum;
            carry = c1 || c2;
        }
        assert!(!carry, "an element plus the modulus overflowed its words");
    }
    out
}

/// The element whose in-memory (Montgomery) limbs are `words`, which must be below p.
fn from_words<F: GpuField>(words: &[u32]) -> F {
    let mut padded = words.to_vec();
    padded.resize(F::LIMBS, 0);
    F::from_bytes(bytemuck::cast_slice(&padded))[0]
}

fn words_of(bytes_le: &[u8]) -> Vec<u32> {
    bytes_le
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("whole words")))
        .collect()
}

/// Edge cases of a prime field, given how to read an element's canonical little-endian bytes.
fn prime_edge_cases<F: GpuField + Field>(canonical_le: impl Fn(&F) -> Vec<u8>) -> Vec<F> {
    let n = F::LIMBS;
    let two = F::ONE.double();
    // Values as field elements: 0, 1, 2, p-1, p-2, R mod p and R^2 mod p as integers.
    let mut out = vec![F::ZERO, F::ONE, two, -F::ONE, -two];
    // Values as raw Montgomery limbs.
    let p_minus_1 = words_of(&canonical_le(&-F::ONE));
    let p_minus_2 = words_of(&canonical_le(&-two));
    let r_mod_p = words_of(F::as_bytes(&[F::ONE]));
    out.extend([&p_minus_1, &p_minus_2, &r_mod_p].map(|w| from_words::<F>(w)));
    out.push(from_words(&[1]));
    for k in 1..n {
        // 2^(32k) - 1 (all-ones low limbs) and 2^(32k) (a carry into limb k).
        out.push(from_words(&vec![u32::MAX; k]));
        let mut power = vec![0; k + 1];
        power[k] = 1;
        out.push(from_words(&power));
    }
    for bit in [1, 31, 33, 63, 64, 127, 128, 200, 32 * n - 40] {
        let mut w = vec![0u32; n];
        w[bit / 32] = 1 << (bit % 32);
        out.push(from_words(&w));
    }
    // The largest all-ones pattern below p: p's top limb minus one, then all-ones limbs.
    let mut ones = vec![u32::MAX; n];
    ones[n - 1] = p_minus_1[n - 1] - 1;
    out.push(from_words(&ones));
    out
}

impl SampleField for Fp {
    fn edge_cases() -> Vec<Self> {
        prime_edge_cases(|x: &Fp| x.to_bytes_le().to_vec())
    }
}

impl SampleField for Scalar {
    fn edge_cases() -> Vec<Self> {
        prime_edge_cases(|x: &Scalar| x.to_bytes_le().to_vec())
    }
}

impl SampleField for Fp2 {
    /// Fq edge cases in each coordinate, paired up so every case meets zero, itself and others.
    fn edge_cases() -> Vec<Self> {
        let e = Fp::edge_cases();
        let mut out: Vec<Fp2> = e.iter().map(|&x| Fp2::new(x, Fp::ZERO)).collect();
        out.extend(e.iter().map(|&x| Fp2::new(Fp::ZERO, x)));
        out.extend(e.iter().map(|&x| Fp2::new(x, x)));
        out.extend(
            e.iter()
                .enumerate()
                .map(|(i, &x)| Fp2::new(x, e[(i * 7 + 3) % e.len()])),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each mix draws its shares of zeros, ones and full-width values (within 1% of 200,000
    /// draws), the same for the same seed, and names itself as it parses.
    #[test]
    fn each_mix_draws_its_shares() {
        let n = 200_000;
        for mix in ScalarMix::ALL {
            let scalars = sample_scalars(3, n, mix);
            assert_eq!(scalars, sample_scalars(3, n, mix), "{mix:?}: seeded");
            let share = |value: Scalar| {
                scalars.iter().filter(|&&s| s == value).count() as f64 / n as f64 * 1000.0
            };
            let (zeros, ones) = mix.per_thousand();
            assert!(
                (share(Scalar::ZERO) - zeros as f64).abs() < 10.0,
                "{mix:?} zeros"
            );
            assert!(
                (share(Scalar::ONE) - ones as f64).abs() < 10.0,
                "{mix:?} ones"
            );
            assert_eq!(mix.name().parse::<ScalarMix>(), Ok(mix));
        }
        assert!("bits".parse::<ScalarMix>().is_err());
        // The real partition's measured shares.
        assert_eq!(ScalarMix::Porep.per_thousand(), (512, 472));
    }
}
