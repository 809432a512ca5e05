//! Recorded constraint systems: a circuit's constraint system recorded once, then each circuit of
//! that structure synthesized from its witness alone must give exactly what full synthesis
//! gives, and proofs through it must equal bellperson's byte for byte; a circuit of another
//! structure must be refused.

mod common;

use std::sync::Arc;

use bellperson::groth16::{create_proof_batch, generate_random_parameters};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Scalar};
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use wgpu_groth16::groth16::batch::prove_batch_recorded_across;
use wgpu_groth16::groth16::circuits::{BitsHeavy, FilecoinLike, ManyInputs, Sha256Preimage};
use wgpu_groth16::groth16::synthesis::synthesize;
use wgpu_groth16::groth16::{CancelToken, Prover, ProverEngine, Step};
use wgpu_groth16::msm::MsmConfig;
use wgpu_groth16::recorded::{CircuitParts, RecordedSystem};
use wgpu_groth16::Error;

/// Inputs allocated after constraints over aux variables, as Filecoin's `inputize` does:
/// x * y = z over aux, then z as a public input, then input * x = w. With `inputs_first`
/// the same variables and constraints come in another order.
#[derive(Clone)]
struct LateInputs {
    x: Option<Scalar>,
    y: Option<Scalar>,
    inputs_first: bool,
}

impl Circuit<Scalar> for LateInputs {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let missing = || SynthesisError::AssignmentMissing;
        let z_value = self.x.zip(self.y).map(|(x, y)| x * y);
        let input = |cs: &mut CS| cs.alloc_input(|| "z in", || z_value.ok_or_else(missing));
        let early = if self.inputs_first {
            Some(input(cs)?)
        } else {
            None
        };
        let x = cs.alloc(|| "x", || self.x.ok_or_else(missing))?;
        let y = cs.alloc(|| "y", || self.y.ok_or_else(missing))?;
        let z = cs.alloc(|| "z", || z_value.ok_or_else(missing))?;
        cs.enforce(|| "x * y = z", |lc| lc + x, |lc| lc + y, |lc| lc + z);
        let z_in = match early {
            Some(v) => v,
            None => input(cs)?,
        };
        cs.enforce(
            || "z in = z",
            |lc| lc + z_in,
            |lc| lc + CS::one(),
            |lc| lc + z,
        );
        let w_value = z_value.zip(self.x).map(|(z, x)| z * x);
        let w = cs.alloc(|| "w", || w_value.ok_or_else(missing))?;
        // A coefficient other than ±1, and a variable twice in one combination.
        let two = Scalar::from(2u64);
        cs.enforce(
            || "2 z_in * x = 2 w",
            |lc| lc + (two, z_in),
            |lc| lc + x + x - x,
            |lc| lc + (two, w),
        );
        Ok(())
    }
}

fn late_inputs(seed: u64, inputs_first: bool) -> LateInputs {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    LateInputs {
        x: Some(Scalar::random(&mut rng)),
        y: Some(Scalar::random(&mut rng)),
        inputs_first,
    }
}

/// Matrices recorded from `blank` synthesize `circuit` exactly as full synthesis does.
fn assert_same_assignment<C: Circuit<Scalar> + Clone>(blank: C, circuit: C) {
    let matrices = RecordedSystem::record(blank).expect("recorded");
    let ours = matrices.synthesize(circuit.clone()).expect("witness run");
    let full = synthesize(circuit).expect("full synthesis");
    assert!(
        ours == full,
        "recorded synthesis differs from full synthesis"
    );
    assert_eq!(matrices.shape(), full.shape());
}

#[test]
fn recorded_synthesis_equals_full_synthesis() {
    assert_same_assignment(Sha256Preimage::blank(64), Sha256Preimage::new(&[7u8; 64]));
    assert_same_assignment(
        FilecoinLike::blank(12).unwrap(),
        FilecoinLike::new(12, 3).unwrap(),
    );
    let values: Vec<Scalar> = (0..40u64).map(Scalar::from).collect();
    assert_same_assignment(ManyInputs::blank(40), ManyInputs::new(values));
    let bits: Vec<bool> = (0..300).map(|i| i % 3 == 0).collect();
    assert_same_assignment(BitsHeavy::blank(300), BitsHeavy::new(bits));
    let blank = LateInputs {
        x: None,
        y: None,
        inputs_first: false,
    };
    assert_same_assignment(blank, late_inputs(1, false));
}

#[test]
fn one_recording_serves_every_witness() {
    let matrices = RecordedSystem::record(FilecoinLike::new(10, 0).unwrap()).unwrap();
    for seed in 1..4 {
        let circuit = FilecoinLike::new(10, seed).unwrap();
        let ours = matrices.synthesize(circuit.clone()).unwrap();
        assert!(ours == synthesize(circuit).unwrap(), "seed {seed}");
    }
}

#[test]
fn another_structure_is_refused() {
    let matrices = RecordedSystem::record(FilecoinLike::blank(10).unwrap()).unwrap();
    match matrices.synthesize(FilecoinLike::new(11, 0).unwrap()) {
        Err(Error::CircuitStructure(why)) => assert!(why.contains("recorded"), "{why}"),
        other => panic!("a larger circuit was not refused: {other:?}"),
    }
    // The same variables and constraints in another order.
    let matrices = RecordedSystem::record(late_inputs(1, false)).unwrap();
    match matrices.synthesize(late_inputs(1, true)) {
        Err(Error::CircuitStructure(why)) => assert!(why.contains("another order"), "{why}"),
        other => panic!("a reordered circuit was not refused: {other:?}"),
    }
}

/// A witness computed in parts equals the whole circuit's, however many parts; parts that do
/// not add up to the recorded circuit are refused.
#[test]
fn witness_in_parts_equals_the_whole_witness() {
    let matrices = RecordedSystem::record(FilecoinLike::blank(11).unwrap()).unwrap();
    let circuit = FilecoinLike::new(11, 7).unwrap();
    let full = synthesize(circuit.clone()).unwrap();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    for parts in [1, 2, 3, 5, 16, 40] {
        let values = matrices
            .witness_in_parts(circuit.clone().in_parts(parts), &pool)
            .unwrap_or_else(|e| panic!("{parts} parts: {e}"));
        assert!(matrices.products(values) == full, "{parts} parts");
    }
    // Waited for from inside its own pool, whose one thread the parts would need.
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    assert!(matches!(
        one.install(|| matrices.witness_in_parts(circuit.clone().in_parts(2), &one)),
        Err(Error::InvalidInput(_))
    ));
    // A part left out.
    let mut short = circuit.clone().in_parts(4);
    short.parts.remove(2);
    match matrices.witness_in_parts(short, &pool) {
        Err(Error::CircuitStructure(why)) => assert!(why.contains("recorded"), "{why}"),
        other => panic!("a missing part was not refused: {}", other.is_ok()),
    }
    // Parts of a circuit of another size: counts differ.
    let other = FilecoinLike::new(10, 7).unwrap().in_parts(4);
    assert!(matches!(
        matrices.witness_in_parts(other, &pool),
        Err(Error::CircuitStructure(_))
    ));
    // The same counts in another order: a part's prefix is not the circuit's prefix.
    let matrices = RecordedSystem::record(late_inputs(1, false)).unwrap();
    let reordered = CircuitParts {
        prefix: late_inputs(1, true),
        parts: vec![late_inputs(1, false)],
    };
    assert!(matches!(
        matrices.witness_in_parts(reordered, &pool),
        Err(Error::CircuitStructure(_))
    ));
}

#[test]
fn recorded_proofs_equal_bellperson_on_every_engine() {
    let blank = Sha256Preimage::blank(32);
    let params = generate_random_parameters::<Bls12, _, _>(
        blank.clone(),
        &mut ChaCha20Rng::seed_from_u64(5),
    )
    .unwrap();
    let matrices = Arc::new(RecordedSystem::record(blank).unwrap());
    let circuits: Vec<Sha256Preimage> = (0..3u8).map(|i| Sha256Preimage::new(&[i; 32])).collect();
    let mut rng = ChaCha20Rng::seed_from_u64(6);
    let rs: Vec<Scalar> = (0..3).map(|_| Scalar::random(&mut rng)).collect();
    let ss: Vec<Scalar> = (0..3).map(|_| Scalar::random(&mut rng)).collect();
    let expected = create_proof_batch(circuits.clone(), &params, rs.clone(), ss.clone()).unwrap();
    let mut engines = vec![Arc::new(ProverEngine::cpu())];
    if let Some(gpu) = common::gpu(common::Target::Native) {
        engines.push(Arc::new(
            ProverEngine::on_device(gpu.clone(), MsmConfig::default()).unwrap(),
        ));
    }
    for engine in engines {
        let prover = Prover::with_engine(&params, engine.clone()).unwrap();
        let proofs = prover
            .prove_batch_recorded(circuits.clone(), &matrices, &rs, &ss)
            .unwrap();
        // On a GPU the products ran there, beside the bases.
        assert_eq!(
            prover.device_matrices(&matrices).is_some(),
            engine.usable_gpu().is_some()
        );
        for (ours, theirs) in proofs.iter().zip(&expected) {
            assert_eq!(
                common::proof_bytes(ours),
                common::proof_bytes(theirs),
                "{}",
                engine.describe()
            );
        }
    }
}

/// The sparse-product and gather kernels against the CPU products and query selection, in
/// both wide-multiply paths, whole and cut into many chunks, output parts and aux parts (a
/// 4 KiB binding limit: 128 Fr a part, 512 entries a chunk): every value, and zeros past the
/// last.
#[test]
fn device_products_equal_the_cpu_products() {
    use wgpu_groth16::sparse::SparseKernels;

    let Some(gpu) = common::gpu(common::Target::Native) else {
        return;
    };
    let bits: Vec<bool> = (0..300).map(|i| i % 3 != 0).collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let pool = &pool;
    let cases: Vec<(&str, Arc<RecordedSystem>, _)> = vec![
        (
            "late inputs",
            Arc::new(RecordedSystem::record(late_inputs(0, false)).unwrap()),
            Box::new(|m: &Arc<RecordedSystem>| m.witness_assignment(late_inputs(1, false), pool))
                as Box<dyn Fn(&Arc<RecordedSystem>) -> _>,
        ),
        (
            "bits",
            Arc::new(RecordedSystem::record(BitsHeavy::blank(300)).unwrap()),
            Box::new(move |m: &Arc<RecordedSystem>| {
                m.witness_assignment(BitsHeavy::new(bits.clone()), pool)
            }),
        ),
        (
            "FilecoinLike 2^8",
            Arc::new(RecordedSystem::record(FilecoinLike::blank(8).unwrap()).unwrap()),
            Box::new(|m: &Arc<RecordedSystem>| {
                m.witness_assignment(FilecoinLike::new(8, 4).unwrap(), pool)
            }),
        ),
    ];
    for wide in gpu.supported_wide_muls() {
        for limit in [None, Some(4096u64)] {
            let mut kernels = SparseKernels::new(gpu, wide).unwrap();
            if let Some(limit) = limit {
                kernels = kernels.with_binding_limit(limit);
            }
            for (name, matrices, witness) in &cases {
                let assignment = witness(matrices).unwrap();
                let what = format!("{name}, {wide}, limit {limit:?}");
                assert_device_products(gpu, &kernels, matrices, &assignment, limit, &what);
            }
        }
    }
}

/// The device's A·z, B·z, C·z and query scalars of `assignment` equal the CPU's, with the
/// matrices resident and streamed.
fn assert_device_products(
    gpu: &wgpu_groth16::gpu::GpuContext,
    kernels: &wgpu_groth16::sparse::SparseKernels,
    matrices: &Arc<RecordedSystem>,
    assignment: &wgpu_groth16::groth16::synthesis::ProvingAssignment,
    limit: Option<u64>,
    what: &str,
) {
    use wgpu_groth16::gpu::DeviceVector;
    use wgpu_groth16::sparse::ProductLayouts;

    let (inputs, aux) = (&assignment.input_assignment, &assignment.aux_assignment);
    let expected = matrices.products_of(inputs, aux);
    let layout = |len| vector_layout(len, limit);
    let expected_a: Vec<Scalar> = inputs
        .iter()
        .copied()
        .chain(assignment.a_aux_density.select(aux))
        .collect();
    let expected_b: Vec<Scalar> = assignment
        .b_input_density
        .select(inputs)
        .into_iter()
        .chain(assignment.b_aux_density.select(aux))
        .collect();
    let layouts = ProductLayouts {
        products: layout(matrices.rows()),
        aux: layout(aux.len()),
        a: layout(expected_a.len()),
        b: layout(expected_b.len()),
    };
    let resident = kernels.upload(matrices, layouts, None).unwrap();
    let streamed = kernels.stream(matrices, layouts, None).unwrap();
    assert!(!resident.streamed() && streamed.streamed());
    assert!(
        streamed.bytes() <= wgpu_groth16::sparse::SparseKernels::stream_bytes_of(matrices),
        "{what}"
    );
    let aux_vector = DeviceVector::upload(gpu, None, aux, layouts.aux).unwrap();
    for device in [resident, streamed] {
        let zeros = |layout| DeviceVector::upload(gpu, None, &[], layout).unwrap();
        let out = [(); 3].map(|_| zeros(layouts.products));
        let queries = [zeros(layouts.a), zeros(layouts.b)];
        let done = kernels
            .products(&device, inputs, &aux_vector, [&out[0], &out[1], &out[2]])
            .unwrap();
        gpu.wait_for(done).unwrap();
        for (query, out) in queries.iter().enumerate() {
            let done = kernels
                .query(&device, query, inputs, &aux_vector, out)
                .unwrap();
            gpu.wait_for(done).unwrap();
        }
        let results = out.iter().chain(&queries);
        let expected = expected.iter().chain([&expected_a, &expected_b]);
        for (which, (vector, expected)) in results.zip(expected).enumerate() {
            let mut expected = expected.clone();
            expected.resize(vector.len(), Scalar::ZERO);
            assert!(
                vector.download(gpu).unwrap() == expected,
                "{what}, streamed: {}, {}",
                device.streamed(),
                ["A·z", "B·z", "C·z", "A scalars", "B scalars"][which]
            );
        }
    }
}

/// Vectors of `len` values in parts of at most `limit` bytes.
fn vector_layout(len: usize, limit: Option<u64>) -> wgpu_groth16::gpu::vector::PartLayout {
    let log_n = len.next_power_of_two().trailing_zeros();
    wgpu_groth16::gpu::vector::PartLayout::new(log_n, 32, limit.unwrap_or(1 << 30)).unwrap()
}

/// One constraint (Σ 2·x_i) · 1 = 2·Σ x_i over as many aux variables as `values`: a row of
/// A that long, every coefficient one to multiply by.
#[derive(Clone)]
struct LongRow {
    values: Vec<Option<Scalar>>,
}

impl LongRow {
    fn new(seed: u64, terms: usize) -> Self {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        LongRow {
            values: (0..terms).map(|_| Some(Scalar::random(&mut rng))).collect(),
        }
    }

    fn blank(terms: usize) -> Self {
        LongRow {
            values: vec![None; terms],
        }
    }
}

impl Circuit<Scalar> for LongRow {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let two = Scalar::from(2u64);
        let sum = self
            .values
            .iter()
            .try_fold(Scalar::ZERO, |acc, v| v.map(|v| acc + v));
        let mut lc = bellperson::LinearCombination::zero();
        for (i, value) in self.values.iter().enumerate() {
            let x = cs.alloc(
                || format!("x{i}"),
                || value.ok_or(SynthesisError::AssignmentMissing),
            )?;
            lc = lc + (two, x);
        }
        let total = cs.alloc_input(
            || "2 sum",
            || {
                sum.map(|s| two * s)
                    .ok_or(SynthesisError::AssignmentMissing)
            },
        )?;
        cs.enforce(|| "long row", |_| lc, |l| l + CS::one(), |l| l + total);
        Ok(())
    }
}

/// A row whose loop makes the most trips under llvmpipe's cap gives the CPU's products on
/// each path (where llvmpipe would cut a longer loop short, a wrong sum); one entry more is
/// refused on a software adapter, whose products then run on the CPU.
#[test]
fn a_row_at_llvmpipes_loop_cap_equals_the_cpu_products() {
    use wgpu_groth16::field::GpuField;
    use wgpu_groth16::gpu::MAX_LOOP_TRIPS;
    use wgpu_groth16::sparse::SparseKernels;

    let Some(gpu) = common::gpu(common::Target::Native) else {
        return;
    };
    let software = gpu.info.device_type == wgpu::DeviceType::Cpu;
    for wide in gpu.supported_wide_muls() {
        let kernels = SparseKernels::new(gpu, wide).unwrap();
        // The loop's exit, then one trip an entry and a multiplication's each.
        let most = (MAX_LOOP_TRIPS as usize - 1) / (1 + Scalar::mul_loop_trips(wide) as usize);
        let matrices = Arc::new(RecordedSystem::record(LongRow::blank(most)).unwrap());
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let assignment = matrices
            .witness_assignment(LongRow::new(1, most), &pool)
            .unwrap();
        let what = format!("a row of {most} entries, {wide}");
        assert_device_products(gpu, &kernels, &matrices, &assignment, None, &what);

        let over = Arc::new(RecordedSystem::record(LongRow::blank(most + 1)).unwrap());
        let [a, b] = wgpu_groth16::sparse::query_lengths(&over);
        let layouts = wgpu_groth16::sparse::ProductLayouts {
            products: vector_layout(over.rows(), None),
            aux: vector_layout(over.aux, None),
            a: vector_layout(a, None),
            b: vector_layout(b, None),
        };
        match kernels.upload(&over, layouts, None) {
            Err(Error::LoopCap { trips, .. }) if software => {
                assert!(trips > MAX_LOOP_TRIPS as u64, "{trips}")
            }
            Ok(_) if !software => {}
            other => panic!("{wide}, {} entries: {:?}", most + 1, other.err()),
        }
    }
}
/// Matrices that do not fit the VRAM budget beside the bases and one proof's buffers stream
/// from the host where their stream buffers fit, else stay there: the products run on the
/// CPU, the A and B scalars are selected on the host beside the H step (resident or
/// streamed, they are gathered on the device as a step of their own), and the proofs are
/// the same.
#[test]
fn matrices_over_the_vram_budget_stream_or_run_their_products_on_the_cpu() {
    use wgpu_groth16::sparse::SparseKernels;

    let Some(gpu) = common::gpu(common::Target::Native) else {
        return;
    };
    let blank = FilecoinLike::blank(10).unwrap();
    let params = generate_random_parameters::<Bls12, _, _>(
        blank.clone(),
        &mut ChaCha20Rng::seed_from_u64(8),
    )
    .unwrap();
    let matrices = Arc::new(RecordedSystem::record(blank).unwrap());
    let circuits: Vec<FilecoinLike> = (0..2).map(|i| FilecoinLike::new(10, i).unwrap()).collect();
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let rs: Vec<Scalar> = (0..2).map(|_| Scalar::random(&mut rng)).collect();
    let ss: Vec<Scalar> = (0..2).map(|_| Scalar::random(&mut rng)).collect();
    let expected = create_proof_batch(circuits.clone(), &params, rs.clone(), ss.clone()).unwrap();

    let unlimited = ProverEngine::on_device(gpu.clone(), MsmConfig::default()).unwrap();
    let ours = wgpu_groth16::groth16::ProvingParameters::from(&params);
    let footprint = unlimited
        .gpu_engine()
        .unwrap()
        .footprint(&ours, Default::default())
        .unwrap();
    // Every base, one proof with its scalar vectors, the workspaces and tables.
    let fits = ours.bases_bytes() + footprint.chunks[0].kept + footprint.resident_proof();
    let bytes = SparseKernels::bytes_of(&matrices);
    let stream = SparseKernels::stream_bytes_of(&matrices);
    assert!(
        stream < bytes,
        "streaming takes less room: {stream} of {bytes}"
    );
    // Where the matrices go: nowhere on the device, streamed, resident.
    for (budget, placement) in [
        (fits + stream - 1, None),
        (fits + bytes - 1, Some(true)),
        (fits + bytes, Some(false)),
    ] {
        let engine = Arc::new(
            ProverEngine::on_device_within(gpu.clone(), MsmConfig::default(), Some(budget))
                .unwrap(),
        );
        let prover = Prover::with_engine(&params, engine)
            .unwrap()
            .with_workers(1);
        let provers = std::slice::from_ref(&prover);
        let never = CancelToken::new();
        let (proofs, report) =
            prove_batch_recorded_across(provers, circuits.clone(), &matrices, &rs, &ss, &never)
                .unwrap();
        assert_eq!(
            prover.device_matrices(&matrices).map(|m| m.streamed()),
            placement,
            "budget {budget}"
        );
        let on_device = placement.is_some();
        let zero = std::time::Duration::ZERO;
        let (gathered, selected) = (
            report.time(Step::Gather),
            report.time(Step::ScalarSelection),
        );
        // Gathered on the device, or selected on the host and uploaded.
        assert_eq!(
            (gathered > zero, selected > zero),
            (true, !on_device),
            "budget {budget}: gather or upload {gathered:?}, host selection {selected:?}"
        );
        for (ours, theirs) in proofs.iter().zip(&expected) {
            assert_eq!(
                common::proof_bytes(ours),
                common::proof_bytes(theirs),
                "budget {budget}"
            );
        }
    }
}
