//! Synthesis against independent oracles: bellpepper's `TestConstraintSystem` (counts,
//! assignments, satisfaction), bellpepper's own `LinearCombination::eval`, and densities
//! recomputed from the linear combinations a recording constraint system keeps. Needs no GPU.

use bellperson::gadgets::multipack::{bytes_to_bits, compute_multipacking};
use bellperson::util_cs::test_cs::TestConstraintSystem;
use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use wgpu_groth16::groth16::circuits::{
    AuxMix, BitsHeavy, FilecoinLike, ManyInputs, Sha256Preimage, SingleConstraint, SizeBounds,
};
use wgpu_groth16::groth16::synthesis::{
    public_inputs, synthesize, synthesize_batch, ProvingAssignment,
};
use wgpu_groth16::recorded::{Density, Shape};
use wgpu_groth16::Error;

/// Keeps every allocation's value (`None` where the circuit has no witness) and every
/// constraint's linear combinations, as the circuit made them.
#[derive(Default)]
struct Recorder {
    inputs: Vec<Option<Scalar>>,
    aux: Vec<Option<Scalar>>,
    constraints: Vec<[LinearCombination<Scalar>; 3]>,
}

impl ConstraintSystem<Scalar> for Recorder {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux.push(f().ok());
        Ok(Variable::new_unchecked(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs.push(f().ok());
        Ok(Variable::new_unchecked(Index::Input(self.inputs.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let zero = LinearCombination::zero;
        self.constraints.push([a(zero()), b(zero()), c(zero())]);
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

fn record<C: Circuit<Scalar>>(circuit: C) -> Recorder {
    let mut recorder = Recorder::default();
    recorder.alloc_input(|| "one", || Ok(Scalar::ONE)).unwrap();
    circuit.synthesize(&mut recorder).unwrap();
    recorder
}

/// Which variables occur with a nonzero coefficient in the linear combinations at `slot`
/// (0 = A, 1 = B) of the recorded constraints: (inputs, aux).
fn occurrences(recorder: &Recorder, slot: usize) -> (Vec<bool>, Vec<bool>) {
    let mut inputs = vec![false; recorder.inputs.len()];
    let mut aux = vec![false; recorder.aux.len()];
    for constraint in &recorder.constraints {
        for (var, coeff) in constraint[slot].iter() {
            if !bool::from(coeff.is_zero()) {
                match var.get_unchecked() {
                    Index::Input(i) => inputs[i] = true,
                    Index::Aux(i) => aux[i] = true,
                }
            }
        }
    }
    (inputs, aux)
}

fn bits(density: &Density) -> Vec<bool> {
    (0..density.len()).map(|i| density.get(i)).collect()
}

fn assert_density(density: &Density, expected: &[bool], what: &str) {
    assert_eq!(bits(density), expected, "{what} density");
    let total = expected.iter().filter(|&&bit| bit).count();
    assert_eq!(density.total(), total, "{what} density total");
}

/// Synthesizes `circuit` and checks the assignment against every oracle.
fn check_against_oracles<C: Circuit<Scalar> + Clone>(circuit: C, name: &str) -> ProvingAssignment {
    let assignment = synthesize(circuit.clone()).unwrap();

    for i in 0..assignment.a.len() {
        assert_eq!(
            assignment.a[i] * assignment.b[i],
            assignment.c[i],
            "{name}: constraint {i} unsatisfied"
        );
    }

    let mut test_cs = TestConstraintSystem::<Scalar>::new();
    circuit.clone().synthesize(&mut test_cs).unwrap();
    assert!(
        test_cs.is_satisfied(),
        "{name}: {:?}",
        test_cs.which_is_unsatisfied()
    );
    assert_eq!(
        assignment.a.len(),
        test_cs.num_constraints() + test_cs.num_inputs(),
        "{name}: the circuit's constraints plus one per input"
    );
    assert_eq!(
        assignment.input_assignment,
        test_cs.scalar_inputs(),
        "{name}"
    );
    assert_eq!(assignment.aux_assignment, test_cs.scalar_aux(), "{name}");

    let recorder = record(circuit);
    let inputs: Vec<Scalar> = recorder.inputs.iter().map(|v| v.unwrap()).collect();
    let aux: Vec<Scalar> = recorder.aux.iter().map(|v| v.unwrap()).collect();
    let n = recorder.constraints.len();
    assert_eq!(assignment.a.len(), n + inputs.len(), "{name}");
    assert!(assignment.b.len() == assignment.a.len() && assignment.c.len() == assignment.a.len());
    for (i, [a, b, c]) in recorder.constraints.iter().enumerate() {
        assert_eq!(assignment.a[i], a.eval(&inputs, &aux), "{name}: A of {i}");
        assert_eq!(assignment.b[i], b.eval(&inputs, &aux), "{name}: B of {i}");
        assert_eq!(assignment.c[i], c.eval(&inputs, &aux), "{name}: C of {i}");
    }
    // The prover's `input * 0 = 0` constraints, which put every input in A.
    for (i, input) in inputs.iter().enumerate() {
        assert_eq!(assignment.a[n + i], *input, "{name}: input constraint {i}");
        assert_eq!(
            assignment.b[n + i],
            Scalar::ZERO,
            "{name}: input constraint {i}"
        );
        assert_eq!(
            assignment.c[n + i],
            Scalar::ZERO,
            "{name}: input constraint {i}"
        );
    }
    let (_, a_aux) = occurrences(&recorder, 0);
    let (b_inputs, b_aux) = occurrences(&recorder, 1);
    assert_density(&assignment.a_aux_density, &a_aux, &format!("{name}: A aux"));
    assert_density(
        &assignment.b_input_density,
        &b_inputs,
        &format!("{name}: B input"),
    );
    assert_density(&assignment.b_aux_density, &b_aux, &format!("{name}: B aux"));
    assignment
}

/// A random linear combination over `vars`: coefficients 0, 1, -1, random, and a term added
/// and subtracted again (a zero coefficient that the combination still lists).
fn random_lc(rng: &mut ChaCha8Rng, vars: &[Variable]) -> LinearCombination<Scalar> {
    let mut lc = LinearCombination::zero();
    for _ in 0..rng.next_u32() % 5 {
        let var = vars[rng.next_u32() as usize % vars.len()];
        lc = match rng.next_u32() % 5 {
            0 => lc + (Scalar::ZERO, var),
            1 => lc + var,
            2 => lc - var,
            3 => lc + (Scalar::random(&mut *rng), var),
            _ => {
                let coeff = Scalar::random(&mut *rng);
                lc + (coeff, var) - (coeff, var)
            }
        };
    }
    lc
}

/// Random constraints over growing sets of inputs and aux variables, a quarter of them with
/// value zero (density follows coefficients, not values); each constraint's C holds a fresh
/// variable for the product plus a random term.
#[derive(Clone)]
struct RandomCircuit {
    seed: u64,
    constraints: usize,
}

impl Circuit<Scalar> for RandomCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut inputs = vec![Scalar::ONE];
        let mut aux = Vec::new();
        let mut vars = vec![CS::one()];
        for k in 0..self.constraints {
            let value = if rng.next_u32() % 4 == 0 {
                Scalar::ZERO
            } else {
                Scalar::random(&mut rng)
            };
            match rng.next_u32() % 3 {
                0 => {
                    vars.push(cs.alloc_input(|| format!("input {k}"), || Ok(value))?);
                    inputs.push(value);
                }
                1 => {
                    vars.push(cs.alloc(|| format!("aux {k}"), || Ok(value))?);
                    aux.push(value);
                }
                _ => {}
            }
            let a = random_lc(&mut rng, &vars);
            let b = random_lc(&mut rng, &vars);
            let extra = vars[rng.next_u32() as usize % vars.len()];
            let extra_value = match extra.get_unchecked() {
                Index::Input(i) => inputs[i],
                Index::Aux(i) => aux[i],
            };
            let coeff = Scalar::random(&mut rng);
            let product = a.eval(&inputs, &aux) * b.eval(&inputs, &aux) - coeff * extra_value;
            let c = cs.alloc(|| format!("product {k}"), || Ok(product))?;
            aux.push(product);
            cs.enforce(
                || format!("constraint {k}"),
                |_| a,
                |_| b,
                |lc| lc + c + (coeff, extra),
            );
        }
        Ok(())
    }
}

fn random_scalars(seed: u64, n: usize) -> Vec<Scalar> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| Scalar::random(&mut rng)).collect()
}

fn random_bits(seed: u64, n: usize) -> Vec<bool> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.next_u32() & 1 == 1).collect()
}

#[test]
fn builtin_circuits_agree_with_test_cs_evaluations_and_recomputed_densities() {
    let [x, y] = random_scalars(1, 2)[..] else {
        unreachable!()
    };
    check_against_oracles(SingleConstraint::new(x, y), "SingleConstraint");
    check_against_oracles(ManyInputs::new(random_scalars(2, 40)), "ManyInputs");
    check_against_oracles(BitsHeavy::new(random_bits(3, 300)), "BitsHeavy");
    check_against_oracles(FilecoinLike::new(8, 4).unwrap(), "FilecoinLike");
    check_against_oracles(
        FilecoinLike::new(10, 5).unwrap().with_mix(AuxMix::Porep),
        "FilecoinLike, the PoRep mix",
    );
    check_against_oracles(Sha256Preimage::new(b"abc"), "Sha256Preimage");
}

#[test]
fn random_circuits_agree_with_test_cs_evaluations_and_recomputed_densities() {
    for seed in 0..20 {
        let circuit = RandomCircuit {
            seed,
            constraints: 1 + seed as usize * 7,
        };
        check_against_oracles(circuit, &format!("RandomCircuit seed {seed}"));
    }
}

#[test]
fn blank_circuits_make_the_same_constraints_without_values() {
    fn same<C: Circuit<Scalar>>(filled: C, blank: C, name: &str) {
        let (filled, blank) = (record(filled), record(blank));
        assert_eq!(filled.inputs.len(), blank.inputs.len(), "{name}: inputs");
        assert_eq!(filled.aux.len(), blank.aux.len(), "{name}: aux");
        assert!(
            filled.constraints == blank.constraints,
            "{name}: constraints"
        );
        // Input 0 is the ONE the recorder allocates itself.
        assert!(blank.inputs[1..].iter().all(Option::is_none), "{name}");
        assert!(blank.aux.iter().all(Option::is_none), "{name}");
    }
    same(
        SingleConstraint::new(Scalar::ONE, Scalar::ONE),
        SingleConstraint::blank(),
        "SingleConstraint",
    );
    same(
        ManyInputs::new(random_scalars(5, 9)),
        ManyInputs::blank(9),
        "ManyInputs",
    );
    same(
        BitsHeavy::new(random_bits(6, 200)),
        BitsHeavy::blank(200),
        "BitsHeavy",
    );
    same(
        FilecoinLike::new(6, 7).unwrap(),
        FilecoinLike::blank(6).unwrap(),
        "FilecoinLike",
    );
    same(
        FilecoinLike::new(10, 7).unwrap().with_mix(AuxMix::Porep),
        FilecoinLike::blank(10).unwrap().with_mix(AuxMix::Porep),
        "FilecoinLike, the PoRep mix",
    );
    same(
        Sha256Preimage::new(&[0xa5; 3]),
        Sha256Preimage::blank(3),
        "Sha256Preimage",
    );
}

fn hex(digest: &str) -> Vec<u8> {
    (0..digest.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digest[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn sha256_preimage_public_inputs_are_the_packed_fips_digests() {
    // FIPS 180-2 examples: one block, and a 56-byte message that pads into two.
    let vectors: [(&[u8], &str); 2] = [
        (
            b"abc",
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        ),
        (
            b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
        ),
    ];
    for (message, digest) in vectors {
        let expected = compute_multipacking::<Scalar>(&bytes_to_bits(&hex(digest)));
        assert_eq!(expected.len(), 2);
        let inputs = public_inputs(Sha256Preimage::new(message)).unwrap();
        assert_eq!(inputs, expected, "{}", String::from_utf8_lossy(message));
    }
}

#[test]
fn public_inputs_exclude_one() {
    let [x, y] = random_scalars(8, 2)[..] else {
        unreachable!()
    };
    assert_eq!(
        public_inputs(SingleConstraint::new(x, y)).unwrap(),
        vec![x * y]
    );
    let values = random_scalars(9, 5);
    assert_eq!(
        public_inputs(ManyInputs::new(values.clone())).unwrap(),
        values
    );
}

#[test]
fn synthesize_batch_equals_synthesizing_each() {
    let circuits: Vec<_> = (0..4)
        .map(|seed| FilecoinLike::new(6, seed).unwrap())
        .collect();
    let batch = synthesize_batch(circuits.clone()).unwrap();
    let each: Vec<_> = circuits
        .into_iter()
        .map(|c| synthesize(c).unwrap())
        .collect();
    assert!(batch == each);
    // Different seeds, different witnesses: the comparison above is not vacuous.
    assert!(batch[0].aux_assignment != batch[1].aux_assignment);
}

#[test]
fn synthesize_batch_refuses_circuits_of_two_sizes() {
    let circuits: Vec<_> = [6, 6, 7, 6]
        .into_iter()
        .map(|k| FilecoinLike::new(k, 1).unwrap())
        .collect();
    let first = synthesize(circuits[0].clone()).unwrap().shape();
    let third = synthesize(circuits[2].clone()).unwrap().shape();
    match synthesize_batch(circuits) {
        Err(Error::BatchShape {
            index,
            expected,
            found,
        }) => {
            assert_eq!(index, 2);
            assert_eq!(expected, first.to_string());
            assert_eq!(found, third.to_string());
        }
        other => panic!("expected Error::BatchShape, got {other:?}"),
    }
}

/// x * y = z, with y either an aux variable or ONE: the same counts, different B densities.
#[derive(Clone)]
struct TimesOne {
    by_one: bool,
}

impl Circuit<Scalar> for TimesOne {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x = cs.alloc(|| "x", || Ok(Scalar::ONE))?;
        let y = cs.alloc(|| "y", || Ok(Scalar::ONE))?;
        let y = if self.by_one { CS::one() } else { y };
        cs.enforce(|| "x * y = x", |lc| lc + x, |lc| lc + y, |lc| lc + x);
        Ok(())
    }
}

#[test]
fn synthesize_batch_refuses_circuits_of_one_size_but_two_densities() {
    let circuits = vec![TimesOne { by_one: false }, TimesOne { by_one: true }];
    assert!(matches!(
        synthesize_batch(circuits),
        Err(Error::BatchShape { index: 1, .. })
    ));
}

#[test]
fn synthesize_batch_refuses_an_empty_batch() {
    assert!(matches!(
        synthesize_batch(Vec::<SingleConstraint>::new()),
        Err(Error::InvalidInput(_))
    ));
}

#[test]
fn blank_circuits_fail_with_assignment_missing() {
    assert!(matches!(
        synthesize(SingleConstraint::blank()),
        Err(Error::Synthesis(SynthesisError::AssignmentMissing))
    ));
    assert!(matches!(
        synthesize(FilecoinLike::blank(5).unwrap()),
        Err(Error::Synthesis(SynthesisError::AssignmentMissing))
    ));
    let batch = vec![
        SingleConstraint::new(Scalar::ONE, Scalar::ONE),
        SingleConstraint::blank(),
    ];
    assert!(matches!(
        synthesize_batch(batch),
        Err(Error::Synthesis(SynthesisError::AssignmentMissing))
    ));
}

#[test]
fn filecoin_like_fills_a_domain_of_2_to_the_k_with_half_its_aux_bits() {
    for k in [8, 10, 12] {
        let assignment = synthesize(FilecoinLike::new(k, u64::from(k)).unwrap()).unwrap();
        let n = assignment.a.len();
        assert!(n <= 1 << k && n > 1 << (k - 1), "k = {k}: {n} constraints");
        assert_eq!(n, (1 << k) - 1, "k = {k}: documented as 2^k - 1");
        let aux = &assignment.aux_assignment;
        let bits = aux
            .iter()
            .filter(|&&v| v == Scalar::ZERO || v == Scalar::ONE)
            .count();
        let share = bits as f64 / aux.len() as f64;
        assert!(
            (0.45..=0.55).contains(&share),
            "k = {k}: {share} of aux are bits"
        );
        // The bits themselves are random, not all 0 or all 1.
        let ones = aux.iter().filter(|&&v| v == Scalar::ONE).count();
        assert!(
            ones > bits / 4 && ones < bits * 3 / 4,
            "k = {k}: {ones} of {bits} bits set"
        );
    }
}

#[test]
fn filecoin_like_with_the_porep_mix_has_the_real_partitions_scalars_and_b_density() {
    for k in [14, 16] {
        let circuit = FilecoinLike::new(k, u64::from(k)).unwrap();
        let porep = circuit.clone().with_mix(AuxMix::Porep);
        assert_eq!(
            porep.size_bounds(),
            circuit.size_bounds(),
            "k = {k}: the same size"
        );
        let assignment = synthesize(porep).unwrap();
        assert_eq!(assignment.a.len(), (1 << k) - 1, "k = {k}");
        let aux = &assignment.aux_assignment;
        let share =
            |value: Scalar| aux.iter().filter(|&&v| v == value).count() as f64 / aux.len() as f64;
        let (zeros, ones) = (share(Scalar::ZERO), share(Scalar::ONE));
        let wide = 1.0 - zeros - ones;
        // The real partition: 51.2% zeros, 47.2% ones, 1.6% full width.
        assert!((0.49..=0.535).contains(&zeros), "k = {k}: {zeros} zeros");
        assert!((0.45..=0.495).contains(&ones), "k = {k}: {ones} ones");
        assert!(
            (0.012..=0.022).contains(&wide),
            "k = {k}: {wide} full width"
        );
        // The real 32 GiB partition's B query holds 25.4% of its aux variables, its A query
        // 99.7% (docs/benchmarks/filecoin-c2.md).
        let share_in =
            |density: &wgpu_groth16::recorded::Density| density.total() as f64 / aux.len() as f64;
        let (a, b) = (
            share_in(&assignment.a_aux_density),
            share_in(&assignment.b_aux_density),
        );
        assert!((0.23..=0.28).contains(&b), "k = {k}: {b} of aux in B");
        assert!(a >= 0.6, "k = {k}: {a} of aux in A");
        // Another constraint system than the default mix's.
        let constraints = |mix| record(FilecoinLike::blank(k).unwrap().with_mix(mix)).constraints;
        assert!(
            constraints(AuxMix::Porep) != constraints(AuxMix::HalfBits),
            "k = {k}"
        );
    }
}

#[test]
fn filecoin_like_refuses_sizes_without_a_domain() {
    for k in [0, 3, 33] {
        assert!(matches!(
            FilecoinLike::new(k, 0),
            Err(Error::InvalidInput(_))
        ));
        assert!(matches!(
            FilecoinLike::blank(k),
            Err(Error::InvalidInput(_))
        ));
    }
}

#[test]
fn size_bounds_hold_the_synthesized_sizes_of_the_builtin_circuits() {
    let assert_within = |bounds: &SizeBounds, shape: Shape, what: &str| {
        let fits = bounds.constraints.contains(&(shape.constraints as u64))
            && bounds.inputs == shape.inputs as u64
            && bounds.aux.contains(&(shape.aux as u64));
        assert!(fits, "{what}: {shape} outside {bounds:?}");
    };
    for k in [4, 6, 9] {
        let circuit = FilecoinLike::new(k, 1).unwrap();
        let bounds = circuit.size_bounds();
        assert_eq!(
            bounds.constraints.start(),
            bounds.constraints.end(),
            "exact"
        );
        assert_eq!(bounds.aux.start(), bounds.aux.end(), "exact");
        assert_within(
            &bounds,
            synthesize(circuit).unwrap().shape(),
            "filecoin-like",
        );
    }
    // Around the block boundaries: 55 bytes fill one padded block, then every 64 a block.
    for len in [0, 1, 31, 55, 56, 64, 65, 119, 120, 183, 184, 300] {
        let circuit = Sha256Preimage::new(&vec![0x5a; len]);
        let shape = synthesize(circuit.clone()).unwrap().shape();
        assert_within(
            &circuit.size_bounds(),
            shape,
            &format!("sha256 of {len} bytes"),
        );
    }
}

#[test]
fn circuits_beyond_the_largest_domain_are_refused_from_their_bounds() {
    let huge = Sha256Preimage::blank(100_000_000).size_bounds();
    assert!(matches!(
        huge.check_domain("huge"),
        Err(Error::InvalidInput(_))
    ));
    let largest = FilecoinLike::blank(32).unwrap().size_bounds();
    largest.check_domain("2^32").unwrap();
    assert_eq!(*largest.domains().start(), 1 << 32);
}
