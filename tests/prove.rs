//! End-to-end proofs against bellperson 0.27: with the same r and s, our proof must equal
//! `create_proof`'s byte for byte, on the CPU engine and on the GPU engine (lavapipe in CI),
//! verify with bellperson's verifier, and fail it with wrong public inputs.

mod common;

use common::proof_bytes;
use std::sync::{Arc, OnceLock};

use bellperson::groth16::{
    create_proof, create_proof_batch, generate_random_parameters, prepare_verifying_key,
    verify_proof, Parameters, Proof,
};
use bellperson::Circuit;
use blstrs::{Bls12, Scalar};
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use wgpu_groth16::gpu::GpuContext;
use wgpu_groth16::groth16::batch::prove_batch_across;
use wgpu_groth16::groth16::batch::prove_batch_recorded_across;
use wgpu_groth16::groth16::circuits::{
    AuxMix, BitsHeavy, FilecoinLike, ManyInputs, Sha256Preimage, SingleConstraint,
};
use wgpu_groth16::groth16::engine::{ChunkOption, DevicePlan, Footprint, GpuEngine, ProofBuffers};
use wgpu_groth16::groth16::synthesis::public_inputs;
use wgpu_groth16::groth16::{
    BatchProgress, CancelToken, PointCheck, ProveReport, Prover, ProverEngine, ProvingParameters,
    Step,
};
use wgpu_groth16::msm::MsmConfig;
use wgpu_groth16::recorded::{RecordedSystem, Shape};
use wgpu_groth16::sparse::MatrixBytes;
use wgpu_groth16::timeline::Timeline;
use wgpu_groth16::Error;

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

fn params_for<C: Circuit<Scalar>>(blank: C, seed: u64) -> Parameters<Bls12> {
    generate_random_parameters::<Bls12, _, _>(blank, &mut rng(seed)).expect("parameters")
}

/// The engines every proof goes through: the CPU, and the GPU when there is one (built once
/// per test binary: compiling the MSM and NTT pipelines on lavapipe takes a while).
fn engines() -> Vec<Arc<ProverEngine>> {
    static GPU: OnceLock<Option<Arc<ProverEngine>>> = OnceLock::new();
    let gpu = GPU.get_or_init(|| {
        let gpu = common::gpu(common::Target::Native)?.clone();
        Some(Arc::new(
            ProverEngine::on_device(gpu, MsmConfig::default()).expect("GPU engine"),
        ))
    });
    let mut engines = vec![Arc::new(ProverEngine::cpu())];
    engines.extend(gpu.clone());
    engines
}

/// Proves `circuit` on every engine and checks each proof against bellperson's bytes and
/// verifier; returns the proof.
fn check_circuit<C: Circuit<Scalar> + Clone + Send>(circuit: C, blank: C, seed: u64) {
    let params = params_for(blank, seed);
    let inputs = public_inputs(circuit.clone()).expect("inputs");
    let (r, s) = (Scalar::random(rng(seed + 1)), Scalar::random(rng(seed + 2)));
    let expected = create_proof(circuit.clone(), &params, r, s).expect("bellperson proof");
    let pvk = prepare_verifying_key(&params.vk);
    assert!(verify_proof(&pvk, &expected, &inputs).expect("verifies"));
    for engine in engines() {
        let prover = Prover::with_engine(&params, engine.clone()).expect("prover");
        let proof = prover.prove(circuit.clone(), r, s).expect("our proof");
        assert_eq!(
            proof_bytes(&proof),
            proof_bytes(&expected),
            "proof on {} differs from bellperson's",
            engine.describe()
        );
        assert!(!engine.gpu_failed(), "{} fell back", engine.describe());
        assert!(verify_proof(&pvk, &proof, &inputs).expect("verifier runs"));
        let mut wrong = inputs.clone();
        wrong[0] += Scalar::ONE;
        assert!(!verify_proof(&pvk, &proof, &wrong).expect("verifier runs"));
    }
}

#[test]
fn sha256_preimage_proof_equals_bellperson() {
    check_circuit(Sha256Preimage::new(b"abc"), Sha256Preimage::blank(3), 1);
}

#[test]
fn many_public_inputs_proof_equals_bellperson() {
    let values: Vec<Scalar> = (0..40).map(|i| Scalar::random(rng(100 + i))).collect();
    check_circuit(ManyInputs::new(values), ManyInputs::blank(40), 2);
}

#[test]
fn bits_heavy_witness_proof_equals_bellperson() {
    let bits: Vec<bool> = (0..3000).map(|i| (i * 7 + i / 5) % 3 == 0).collect();
    check_circuit(BitsHeavy::new(bits), BitsHeavy::blank(3000), 3);
}

#[test]
fn filecoin_like_with_the_porep_mix_proof_equals_bellperson() {
    check_circuit(
        FilecoinLike::new(10, 41).unwrap().with_mix(AuxMix::Porep),
        FilecoinLike::blank(10).unwrap().with_mix(AuxMix::Porep),
        41,
    );
}

#[test]
fn single_constraint_proof_equals_bellperson() {
    let (x, y) = (Scalar::random(rng(30)), Scalar::random(rng(31)));
    check_circuit(SingleConstraint::new(x, y), SingleConstraint::blank(), 4);
}

#[test]
fn batch_proofs_equal_bellperson_batch() {
    let params = params_for(FilecoinLike::blank(10).unwrap(), 5);
    let circuits: Vec<_> = (0..3)
        .map(|seed| FilecoinLike::new(10, seed).unwrap())
        .collect();
    let rs: Vec<Scalar> = (0..3).map(|i| Scalar::random(rng(50 + i))).collect();
    let ss: Vec<Scalar> = (0..3).map(|i| Scalar::random(rng(60 + i))).collect();
    let expected = create_proof_batch(circuits.clone(), &params, rs.clone(), ss.clone())
        .expect("bellperson batch");
    let pvk = prepare_verifying_key(&params.vk);
    for engine in engines() {
        let prover = Prover::with_engine(&params, engine.clone()).expect("prover");
        let (proofs, report) = prover
            .prove_batch_report(circuits.clone(), &rs, &ss)
            .expect("our batch");
        assert_eq!(report.proofs, 3);
        assert_eq!(report.domain, 1 << 10);
        for ((proof, want), circuit) in proofs.iter().zip(&expected).zip(&circuits) {
            assert_eq!(
                proof_bytes(proof),
                proof_bytes(want),
                "on {}",
                engine.describe()
            );
            let inputs = public_inputs(circuit.clone()).unwrap();
            assert!(verify_proof(&pvk, proof, &inputs).unwrap());
        }
    }
}

#[test]
fn random_proofs_verify() {
    let params = params_for(SingleConstraint::blank(), 7);
    let pvk = prepare_verifying_key(&params.vk);
    let circuit = SingleConstraint::new(Scalar::from(3u64), Scalar::from(5u64));
    let inputs = public_inputs(circuit.clone()).unwrap();
    for engine in engines() {
        let prover = Prover::with_engine(&params, engine).unwrap();
        let one = prover.prove_random(circuit.clone()).unwrap();
        let two = prover.prove_batch_random(vec![circuit.clone()]).unwrap();
        assert!(verify_proof(&pvk, &one, &inputs).unwrap());
        assert!(verify_proof(&pvk, &two[0], &inputs).unwrap());
        assert_ne!(
            proof_bytes(&one),
            proof_bytes(&two[0]),
            "r and s must be fresh"
        );
    }
}

#[test]
fn parameters_of_another_circuit_are_refused() {
    let params = params_for(BitsHeavy::blank(100), 8);
    let prover = Prover::with_engine(&params, Arc::new(ProverEngine::cpu())).unwrap();
    let err = prover
        .prove(BitsHeavy::new(vec![true; 120]), Scalar::ONE, Scalar::ONE)
        .unwrap_err();
    assert!(matches!(err, Error::ParamsMismatch(_)), "{err}");
    let err = prover
        .prove(
            SingleConstraint::new(Scalar::ONE, Scalar::ONE),
            Scalar::ONE,
            Scalar::ONE,
        )
        .unwrap_err();
    assert!(matches!(err, Error::ParamsMismatch(_)), "{err}");
}

#[test]
fn batch_of_two_shapes_is_refused() {
    let params = params_for(FilecoinLike::blank(8).unwrap(), 9);
    let prover = Prover::with_engine(&params, Arc::new(ProverEngine::cpu())).unwrap();
    let circuits = vec![
        FilecoinLike::new(8, 1).unwrap(),
        FilecoinLike::new(9, 2).unwrap(),
    ];
    let one = [Scalar::ONE, Scalar::ONE];
    let err = prover.prove_batch(circuits, &one, &one).unwrap_err();
    assert!(matches!(err, Error::BatchShape { index: 1, .. }), "{err}");
}

#[test]
fn bad_parameter_files_give_their_errors() {
    let params = params_for(SingleConstraint::blank(), 10);
    let mut file = Vec::new();
    params.write(&mut file).unwrap();
    let path =
        std::env::temp_dir().join(format!("wgpu-groth16-prove-{}.params", std::process::id()));

    std::fs::write(&path, &file[..file.len() - 10]).unwrap();
    let err = ProvingParameters::read(&path, PointCheck::Checked).unwrap_err();
    assert!(
        matches!(
            err,
            Error::ParamsTruncated {
                section: "b_g2",
                ..
            }
        ),
        "{err}"
    );

    // The first point of l, its y coordinate nudged: off the curve.
    let ours = ProvingParameters::from(&params);
    let l_start = file.len()
        - 4 * 4
        - 96 * (ours.l.len() + ours.a.len() + ours.b_g1.len())
        - 192 * ours.b_g2.len();
    let mut bad = file.clone();
    bad[l_start + 95] ^= 1;
    std::fs::write(&path, &bad).unwrap();
    let err = ProvingParameters::read(&path, PointCheck::Checked).unwrap_err();
    assert!(
        matches!(
            err,
            Error::ParamsInvalidPoint {
                section: "l",
                index: 0,
                ..
            }
        ),
        "{err}"
    );

    // Good file: proves.
    std::fs::write(&path, &file).unwrap();
    let read = ProvingParameters::read(&path, PointCheck::Checked).unwrap();
    std::fs::remove_file(&path).unwrap();
    let circuit = SingleConstraint::new(Scalar::from(2u64), Scalar::from(9u64));
    let prover = Prover::with_engine(read, Arc::new(ProverEngine::cpu())).unwrap();
    let proof = prover
        .prove(circuit.clone(), Scalar::ONE, Scalar::ONE)
        .unwrap();
    let expected = create_proof(circuit, &params, Scalar::ONE, Scalar::ONE).unwrap();
    assert_eq!(proof_bytes(&proof), proof_bytes(&expected));
}

/// What [`batch_losing_its_gpu`] left: the batch's result, bellperson's proofs, and the
/// prover and engine.
struct LostMidBatch {
    proved: Result<Vec<Proof<Bls12>>, Error>,
    expected: Vec<Proof<Bls12>>,
    prover: Prover,
    engine: Arc<ProverEngine>,
}

/// A batch of `BitsHeavy` proofs on an engine of its own device (`fallback` or not), whose
/// device is destroyed from another thread once the batch's first proof has ended.
fn batch_losing_its_gpu(fallback: bool, seed: u64) -> Option<LostMidBatch> {
    let gpu = common::gpu(common::Target::Native)?;
    let own = GpuContext::from_adapter(gpu.adapter.clone()).unwrap();
    let engine = Arc::new(ProverEngine::on_device(own, MsmConfig::default()).unwrap());
    engine.set_cpu_fallback(fallback);
    let params = params_for(BitsHeavy::blank(200), seed);
    let timeline = Arc::new(Timeline::new());
    let prover = Prover::with_engine(&params, engine.clone())
        .unwrap()
        .with_timeline(timeline.clone());
    const PROOFS: usize = 12;
    let circuits: Vec<_> = (0..PROOFS)
        .map(|i| BitsHeavy::new((0..200).map(|j| (i + j) % 3 == 0).collect()))
        .collect();
    let mut rng = rng(seed + 100);
    let rs: Vec<Scalar> = (0..PROOFS).map(|_| Scalar::random(&mut rng)).collect();
    let ss: Vec<Scalar> = (0..PROOFS).map(|_| Scalar::random(&mut rng)).collect();
    let expected = create_proof_batch(circuits.clone(), &params, rs.clone(), ss.clone()).unwrap();
    let destroyer = std::thread::spawn({
        let engine = engine.clone();
        move || {
            while !timeline.spans().iter().any(|span| span.name == "prove 0") {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            engine.device().unwrap().device.destroy();
        }
    });
    let proved = prover.prove_batch(circuits, &rs, &ss);
    destroyer.join().unwrap();
    Some(LostMidBatch {
        proved,
        expected,
        prover,
        engine,
    })
}

/// The GPU lost in the middle of a batch, with the CPU fallback: the batch's remaining
/// proofs are made on the CPU and every proof equals bellperson's.
#[test]
fn gpu_lost_mid_batch_falls_back_to_the_cpu() {
    let Some(LostMidBatch {
        proved,
        expected,
        engine,
        ..
    }) = batch_losing_its_gpu(true, 11)
    else {
        return;
    };
    let proofs = proved.expect("falls back instead of failing");
    assert!(engine.gpu_failed(), "the loss must be noticed mid-batch");
    assert_eq!(
        proofs.iter().map(proof_bytes).collect::<Vec<_>>(),
        expected.iter().map(proof_bytes).collect::<Vec<_>>()
    );
}

/// The GPU lost in the middle of a batch without the CPU fallback: the batch fails with the
/// GPU's error, and so does the next proof, saying why.
#[test]
fn gpu_lost_mid_batch_without_cpu_fallback_fails_the_batch_and_the_next() {
    let Some(LostMidBatch {
        proved,
        prover,
        engine,
        ..
    }) = batch_losing_its_gpu(false, 13)
    else {
        return;
    };
    let lost = proved.unwrap_err();
    assert!(lost.is_gpu_failure(), "{lost}");
    assert!(engine.gpu_failed(), "the loss must be noticed");
    let circuit = BitsHeavy::new((0..200).map(|i| i % 5 == 0).collect());
    let next = prover.prove(circuit, Scalar::ONE, Scalar::ONE).unwrap_err();
    assert!(
        next.to_string().contains("does not fall back to the CPU"),
        "{next}"
    );
}

#[test]
fn batch_timeline_records_each_circuit_synthesized_before_it_is_proved() {
    let params = params_for(FilecoinLike::blank(8).unwrap(), 12);
    let timeline = Arc::new(Timeline::new());
    // One worker: its proofs' step times add up to less than the wall time.
    let prover = Prover::with_engine(&params, Arc::new(ProverEngine::cpu()))
        .unwrap()
        .with_workers(1)
        .with_timeline(timeline.clone());
    let circuits: Vec<_> = (0..4)
        .map(|seed| FilecoinLike::new(8, seed).unwrap())
        .collect();
    let one = vec![Scalar::ONE; 4];
    let (proofs, report) = prover
        .prove_batch_report(circuits.clone(), &one, &one)
        .unwrap();
    let expected = create_proof_batch(circuits, &params, one.clone(), one).unwrap();
    assert_eq!(
        proofs.iter().map(proof_bytes).collect::<Vec<_>>(),
        expected.iter().map(proof_bytes).collect::<Vec<_>>()
    );
    assert!(report.wall >= report.after_synthesis());
    let spans = timeline.spans();
    for i in 0..4 {
        let find = |name: String| {
            spans
                .iter()
                .find(|s| s.name == name)
                .unwrap_or_else(|| panic!("no span {name} in {spans:?}"))
        };
        let (synthesized, proved) = (find(format!("synthesize {i}")), find(format!("prove {i}")));
        assert!(
            synthesized.end <= proved.start,
            "{synthesized:?} {proved:?}"
        );
        assert_eq!(proved.lane, "device 0 worker 0");
    }
}

/// The budget of `budget_engine`: room for a FilecoinLike proof at domain 2^10 with its
/// bases resident, not for one at 2^12 (`GpuEngine::footprint` gives each part; the tests
/// that need other plans set budgets of their own, found from it).
const BUDGET: u64 = 5684 << 10;

/// A GPU engine whose pooled buffers, MSM workspaces and resident bases must fit [`BUDGET`]
/// (its own device: the pool accounting of the shared engine is shared with the other
/// tests), and a guard that keeps the tests using it from running at once (they read its
/// pool's accounting).
fn budget_engine() -> Option<(Arc<ProverEngine>, std::sync::MutexGuard<'static, ()>)> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    static ENGINE: OnceLock<Option<Arc<ProverEngine>>> = OnceLock::new();
    ENGINE
        .get_or_init(|| {
            let gpu = common::gpu(common::Target::Native)?;
            let own = GpuContext::from_adapter(gpu.adapter.clone()).unwrap();
            // Chunks of 256 points: streamed MSMs of several chunks at these small sizes,
            // so that plans can stream bases through buffers smaller than the bases.
            let config = MsmConfig {
                max_chunk_points: Some(256),
                ..MsmConfig::default()
            };
            let engine = ProverEngine::on_device_within(own, config, Some(BUDGET));
            Some(Arc::new(engine.unwrap()))
        })
        .clone()
        .map(|engine| {
            let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
            // A test that failed with a budget of its own left it set.
            let gpu = engine.gpu_engine().expect("a GPU engine");
            gpu.set_vram_budget(BUDGET);
            (engine, guard)
        })
}

/// A VRAM budget bounds the process's device memory: the pool gets it less the upload
/// staging's share (a sixteenth, in whole staging buffers, none below 512 MiB) and less
/// what the process held before its first buffer.
#[test]
fn the_pool_gets_the_budget_less_upload_staging_and_what_the_process_held() {
    let Some((engine, _one_at_a_time)) = budget_engine() else {
        return;
    };
    let gpu = engine.gpu_engine().expect("a GPU engine");
    let buffer = gpu.gpu().staging_buffer_bytes();
    let held = gpu.held_before_buffers();
    for budget in [
        1u64 << 30,
        (1 << 30) + buffer - 1,
        8 << 30,
        64 << 30,
        BUDGET,
    ] {
        gpu.set_vram_budget(budget);
        let staging = (budget / 16 / buffer * buffer).min(1 << 30);
        assert_eq!(
            gpu.pool().budget(),
            budget.saturating_sub(staging + held),
            "budget {budget}"
        );
    }
    // With the usual 32 MiB buffers: 1 GiB keeps two of them, 64 GiB the staging's cap.
    if buffer == 32 << 20 {
        gpu.set_vram_budget(1 << 30);
        assert_eq!(gpu.pool().budget(), (1 << 30) - (64 << 20) - held);
        gpu.set_vram_budget(64 << 30);
        assert_eq!(gpu.pool().budget(), (64 << 30) - (1 << 30) - held);
    }
    gpu.set_vram_budget(BUDGET);
}

#[test]
fn a_vram_budget_below_one_proof_is_refused() {
    let Some((engine, _one_at_a_time)) = budget_engine() else {
        return;
    };
    let params = params_for(FilecoinLike::blank(12).unwrap(), 13);
    let gpu = engine.gpu_engine().expect("a GPU engine");
    let footprint = gpu
        .footprint(&params.clone().into(), Default::default())
        .unwrap();
    // The smallest workspaces alone: no proof fits beside them.
    let below = footprint.chunks.last().unwrap().kept;
    gpu.set_vram_budget(below);
    let err = Prover::with_engine(&params, engine.clone())
        .err()
        .expect("over budget");
    gpu.set_vram_budget(BUDGET);
    assert!(
        matches!(err, Error::VramBudget { needed, budget, .. } if needed > below && budget == below),
        "{err}"
    );
}

#[test]
fn bases_over_the_budget_stream_and_proofs_still_equal_bellperson() {
    let Some((engine, _one_at_a_time)) = budget_engine() else {
        return;
    };
    let params = params_for(FilecoinLike::blank(10).unwrap(), 14);
    let gpu = engine.gpu_engine().expect("a GPU engine");
    let footprint = gpu
        .footprint(&params.clone().into(), Default::default())
        .unwrap();
    // The largest budget (to a KiB) in which some G1 bases stream.
    let budget = smallest_budget_where(&footprint, |plan| !plan.streams[0]) - (1 << 10);
    gpu.set_vram_budget(budget);
    gpu.pool().reset_peak();
    let prover = Prover::with_engine(&params, engine.clone())
        .unwrap()
        .with_workers(8);
    let plan = prover.plan().expect("a plan on the GPU").clone();
    assert!(!plan.all_resident(&footprint), "{plan:?}");
    assert!(plan.streams[0], "{plan:?}");
    // B's G2 MSM runs beside A's and B's G1 ones (its bases stream too).
    assert!(plan.g2_beside_g1(), "{plan:?}");
    // A recorded proof would stage ahead beside one past its H step: a worker for it.
    let ahead = usize::from(plan.stages_ahead(&footprint));
    assert_eq!(prover.workers(), (plan.proofs_in_flight + ahead).min(8));
    let circuit = FilecoinLike::new(10, 3).unwrap();
    let (r, s) = (Scalar::random(rng(80)), Scalar::random(rng(81)));
    let expected = create_proof(circuit.clone(), &params, r, s).unwrap();
    assert_eq!(
        proof_bytes(&prover.prove(circuit, r, s).unwrap()),
        proof_bytes(&expected)
    );
    let peak = gpu.pool().stats().peak_bytes;
    assert!(
        peak <= budget,
        "{peak} bytes counted at once, budget {budget}"
    );
    gpu.set_vram_budget(BUDGET);
}

/// The smallest budget (to a KiB) in which `params`' plan keeps a proof's vectors as `mode`
/// says.
fn smallest_budget_planning(
    gpu: &GpuEngine,
    params: &Parameters<Bls12>,
    mode: ProofBuffers,
) -> u64 {
    let footprint = gpu
        .footprint(&params.clone().into(), Default::default())
        .unwrap();
    smallest_budget_where(&footprint, |plan| plan.proof == mode)
}

/// The smallest budget (to a KiB) whose plan for `footprint` is `wanted`.
fn smallest_budget_where(footprint: &Footprint, wanted: impl Fn(&DevicePlan) -> bool) -> u64 {
    let smallest = footprint.chunks.last().unwrap().kept;
    // Everything but the workspaces: every plan is found below it.
    let end = smallest
        + 3 * footprint.domain_vector
        + footprint.scalar_vectors.iter().sum::<u64>()
        + footprint.bases_bytes()
        + footprint.matrices
        + (4 << 20);
    (smallest..end)
        .step_by(1 << 10)
        .find(|&budget| DevicePlan::new(footprint, budget, 1).is_ok_and(|plan| wanted(&plan)))
        .expect("a budget that plans this way")
}

/// A proof within the smallest budget whose plan keeps a proof's vectors as `mode` says:
/// the proof (full synthesis, then a recorded system's) is still bellperson's, on the GPU,
/// and the pool never counts more than the budget.
fn proof_within_a_budget_planning(mode: ProofBuffers, seed: u64) {
    let Some((engine, _one_at_a_time)) = budget_engine() else {
        return;
    };
    prove_within_the_smallest_budget(&engine, seed, |plan| plan.proof == mode, Told::Nothing);
    engine.gpu_engine().unwrap().set_vram_budget(BUDGET);
}

#[test]
fn scalars_streamed_from_the_host_give_bellpersons_proof_within_the_budget() {
    proof_within_a_budget_planning(ProofBuffers::ScalarsStreamed, 17);
}

#[test]
fn the_h_step_in_parts_gives_bellpersons_proof_within_the_budget() {
    proof_within_a_budget_planning(ProofBuffers::HInParts, 19);
}

/// What a prover is told of its circuit before its plan.
#[derive(Clone, Copy, PartialEq)]
enum Told {
    Nothing,
    /// The recorded matrices (`Prover::with_engine_for`): they stay on the device.
    Matrices,
    /// The recorded matrices' size, sent to a prover whose parameters are loading
    /// (`Prover::loading_for`, as `c2` does).
    MatricesLater,
}

/// Within the smallest budget whose plan for FilecoinLike 2^10 (its matrices known where
/// `told`) is `wanted`: a prover proves a circuit by full synthesis and from its recorded
/// system, each proof bellperson's, on the GPU, the pool never counting more than the
/// budget, which stays set. Returns the recorded proof's report.
fn prove_within_the_smallest_budget(
    engine: &Arc<ProverEngine>,
    seed: u64,
    wanted: impl Fn(&DevicePlan) -> bool,
    told: Told,
) -> ProveReport {
    let params = params_for(FilecoinLike::blank(10).unwrap(), seed);
    let system = Arc::new(RecordedSystem::record(FilecoinLike::blank(10).unwrap()).unwrap());
    let gpu = engine.gpu_engine().expect("a GPU engine");
    let matrices_bytes = MatrixBytes::of(&system);
    let matrices = match told {
        Told::Nothing => MatrixBytes::default(),
        Told::Matrices | Told::MatricesLater => matrices_bytes,
    };
    let footprint = gpu.footprint(&params.clone().into(), matrices).unwrap();
    let budget = smallest_budget_where(&footprint, |plan| wanted(plan));
    gpu.set_vram_budget(budget);
    gpu.pool().reset_peak();
    let prover = match told {
        Told::Nothing => Prover::with_engine(&params, engine.clone()).unwrap(),
        Told::Matrices => Prover::with_engine_for(&params, engine.clone(), &system).unwrap(),
        Told::MatricesLater => {
            let (plan, matrices) = std::sync::mpsc::channel();
            let loaded = params.clone();
            let prover =
                Prover::loading_for(engine.clone(), matrices, move || Ok(loaded.into())).unwrap();
            plan.send(matrices_bytes).unwrap();
            prover
        }
    };
    let plan = prover.plan().expect("a plan on the GPU").clone();
    assert!(wanted(&plan), "{plan:?}");
    if told != Told::Nothing {
        // Resident or streamed as planned.
        let device = prover.device_matrices(&system);
        assert_eq!(
            device.map(|m| m.streamed()),
            Some(plan.matrices_streamed),
            "{plan:?}"
        );
    }
    let circuit = FilecoinLike::new(10, seed + 1).unwrap();
    let (r, s) = (Scalar::random(rng(seed + 2)), Scalar::random(rng(seed + 3)));
    let expected = proof_bytes(&create_proof(circuit.clone(), &params, r, s).unwrap());
    let proof = prover.prove(circuit.clone(), r, s).unwrap();
    assert_eq!(proof_bytes(&proof), expected, "full synthesis");
    let never = CancelToken::new();
    let (recorded, report) = prove_batch_recorded_across(
        std::slice::from_ref(&prover),
        vec![circuit],
        &system,
        &[r],
        &[s],
        &never,
    )
    .unwrap();
    let peak = gpu.pool().stats().peak_bytes;
    assert_eq!(proof_bytes(&recorded[0]), expected, "recorded system");
    assert!(!engine.gpu_failed(), "proved on the GPU");
    assert!(
        peak <= budget,
        "{peak} bytes counted at once, budget {budget}"
    );
    report
}

/// Told its circuit's matrices, a prover keeps them on the device beside three vectors
/// within the smallest budget whose plan sets room aside for them so, where a prover not
/// told gives that room to the bases and runs the products on the CPU.
#[test]
fn matrices_known_to_the_plan_stay_on_the_device_within_the_budget() {
    let Some((engine, _one_at_a_time)) = budget_engine() else {
        return;
    };
    let resident =
        |plan: &DevicePlan| plan.matrices_bytes > 0 && plan.proof == ProofBuffers::Resident;
    prove_within_the_smallest_budget(&engine, 29, resident, Told::Matrices);
    let params = params_for(FilecoinLike::blank(10).unwrap(), 29);
    let system = Arc::new(RecordedSystem::record(FilecoinLike::blank(10).unwrap()).unwrap());
    let not_told = Prover::with_engine(&params, engine.clone()).unwrap();
    assert!(
        not_told.device_matrices(&system).is_none(),
        "the bases take the room: {:?}",
        not_told.plan()
    );
    drop(not_told);
    engine.gpu_engine().unwrap().set_vram_budget(BUDGET);
}

/// Within the smallest budget that plans the products and the H step two vectors at a time,
/// with the matrices resident and then streamed (at 2^27, 16 GiB: 12 GiB of vectors and 256
/// MiB of stream buffers where the 6.7 GB of matrices do not fit), a recorded proof takes
/// the paired path (no products step of its own, no A, B selection on the host) and a fully
/// synthesized one the H step in parts, both bellperson's: the prover loads its parameters
/// and learns the matrices' size meanwhile, as `c2`'s does.
#[test]
fn products_in_pairs_give_bellpersons_proof_within_the_budget() {
    let Some((engine, _one_at_a_time)) = budget_engine() else {
        return;
    };
    for (streamed, seed) in [(false, 33), (true, 37)] {
        let pairs = |plan: &DevicePlan| {
            // Both queries' scalars gathered at once, B's G2 MSM beside the G1 ones.
            plan.proof == ProofBuffers::ProductsInPairs
                && plan.matrices_streamed == streamed
                && plan.g2_beside_g1()
        };
        let report = prove_within_the_smallest_budget(&engine, seed, pairs, Told::MatricesLater);
        assert_products_and_gathers_on_the_device(&report, streamed);
    }
    engine.gpu_engine().unwrap().set_vram_budget(BUDGET);
}

/// Within the smallest budget whose plan runs a proof's G1 MSMs two at a time (H's with L's,
/// A's with B's, each pair's chunks in turn, as at 24 GiB and 2^27) beside B's G2 MSM, a
/// proof by full synthesis (A and B selected on the host) and a recorded one (gathered on
/// the device) are bellperson's, within the budget.
#[test]
fn g1_msms_two_at_a_time_give_bellpersons_proof_within_the_budget() {
    let Some((engine, _one_at_a_time)) = budget_engine() else {
        return;
    };
    let together = |plan: &DevicePlan| plan.g1_together && plan.g2_beside_g1();
    prove_within_the_smallest_budget(&engine, 41, together, Told::MatricesLater);
    engine.gpu_engine().unwrap().set_vram_budget(BUDGET);
}

/// Within the smallest budget whose plan holds one proof in flight with its a, b, c and
/// scalars on the device beside resident matrices, where the room b and c leave after the H
/// step holds the next recorded proof's aux values (the H100's plan for a 32 GiB C2): a
/// batch of three recorded proofs runs two workers, some proof stages ahead beside the one
/// computing, and every proof is bellperson's, the pool within the budget.
#[test]
fn proofs_staged_ahead_give_bellpersons_proofs_within_the_budget() {
    let Some((engine, _one_at_a_time)) = budget_engine() else {
        return;
    };
    let seed = 43;
    let params = params_for(FilecoinLike::blank(10).unwrap(), seed);
    let system = Arc::new(RecordedSystem::record(FilecoinLike::blank(10).unwrap()).unwrap());
    let gpu = engine.gpu_engine().expect("a GPU engine");
    let matrices = MatrixBytes::of(&system);
    let footprint = gpu.footprint(&params.clone().into(), matrices).unwrap();
    let ahead = |plan: &DevicePlan| {
        plan.proof == ProofBuffers::Resident
            && plan.matrices_bytes > 0
            && plan.stages_ahead(&footprint)
    };
    let budget = smallest_budget_where(&footprint, ahead);
    gpu.set_vram_budget(budget);
    gpu.pool().reset_peak();
    let prover = Prover::with_engine_for(&params, engine.clone(), &system).unwrap();
    let plan = prover.plan().expect("a plan on the GPU").clone();
    assert!(ahead(&plan) && plan.proofs_in_flight == 1, "{plan:?}");
    assert_eq!(
        prover.workers(),
        2,
        "one proof in flight, one staging ahead"
    );
    let circuits: Vec<_> = (1..=3)
        .map(|i| FilecoinLike::new(10, seed + i).unwrap())
        .collect();
    let rs: Vec<_> = (0..3).map(|i| Scalar::random(rng(seed + 10 + i))).collect();
    let ss: Vec<_> = (0..3).map(|i| Scalar::random(rng(seed + 20 + i))).collect();
    let expected: Vec<_> = circuits
        .iter()
        .zip(rs.iter().zip(&ss))
        .map(|(circuit, (&r, &s))| {
            proof_bytes(&create_proof(circuit.clone(), &params, r, s).unwrap())
        })
        .collect();
    let before = gpu.proofs_staged_ahead();
    let never = CancelToken::new();
    let (proofs, _) = prove_batch_recorded_across(
        std::slice::from_ref(&prover),
        circuits,
        &system,
        &rs,
        &ss,
        &never,
    )
    .unwrap();
    let peak = gpu.pool().stats().peak_bytes;
    let proofs: Vec<_> = proofs.iter().map(proof_bytes).collect();
    assert_eq!(proofs, expected);
    assert!(!engine.gpu_failed(), "proved on the GPU");
    assert!(gpu.proofs_staged_ahead() > before, "no proof staged ahead");
    assert!(
        peak <= budget,
        "{peak} bytes counted at once, budget {budget}"
    );
    drop(prover);
    gpu.set_vram_budget(BUDGET);
}

/// A recorded proof's products ran inside its H step (no step of their own) and its A and B
/// scalars were gathered on the device (none selected on the host).
fn assert_products_and_gathers_on_the_device(report: &ProveReport, streamed: bool) {
    let zero = std::time::Duration::ZERO;
    assert_eq!(report.time(Step::Products), zero, "streamed: {streamed}");
    assert_eq!(
        report.time(Step::ScalarSelection),
        zero,
        "streamed: {streamed}"
    );
    assert!(report.time(Step::Gather) > zero, "streamed: {streamed}");
}

/// Within the smallest budget that plans the products on the device beside the H step in
/// parts (the aux values beside one product, then one vector and a part with the aux values
/// off the device: 8 GiB at 2^27, the plan at 12 GiB), on an
/// engine whose vectors come in parts of 16 KiB (at 2^27 they come in four), with the
/// matrices resident and streamed: a recorded proof computes its products inside the H
/// step and gathers its A and B scalars on the device, and a fully synthesized one takes
/// the H step in parts, each bellperson's, within the budget.
#[test]
fn products_in_parts_give_bellpersons_proof_within_the_budget() {
    static ENGINE: OnceLock<Option<Arc<ProverEngine>>> = OnceLock::new();
    let Some(engine) = ENGINE
        .get_or_init(|| {
            let gpu = common::gpu(common::Target::Native)?;
            let own = GpuContext::from_adapter(gpu.adapter.clone()).unwrap();
            // Chunks of 256 points: streamed MSMs of several chunks at these small sizes,
            // so that plans can stream bases through buffers smaller than the bases.
            let config = MsmConfig {
                max_chunk_points: Some(256),
                ..MsmConfig::default()
            };
            let engine = ProverEngine::on_device_within(own, config, Some(BUDGET));
            Some(Arc::new(engine.unwrap().with_vector_parts_within(16 << 10)))
        })
        .clone()
    else {
        return;
    };
    for streamed in [false, true] {
        let parts = |plan: &DevicePlan| {
            plan.proof == ProofBuffers::ProductsInParts && plan.matrices_streamed == streamed
        };
        let report = prove_within_the_smallest_budget(&engine, 41, parts, Told::Matrices);
        assert_products_and_gathers_on_the_device(&report, streamed);
        // Of host memory a recorded proof holds b's and c's transforms read back, and a
        // fully synthesized one its a, b, c and A, B selection besides.
        let params = params_for(FilecoinLike::blank(10).unwrap(), 41);
        let system = Arc::new(RecordedSystem::record(FilecoinLike::blank(10).unwrap()).unwrap());
        let prover = Prover::with_engine_for(&params, engine.clone(), &system).unwrap();
        assert!(parts(prover.plan().unwrap()), "{:?}", prover.plan());
        let circuit = || FilecoinLike::new(10, 1).unwrap();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let recorded = system.witness_assignment(circuit(), &pool).unwrap();
        let read_back = 32 * 2 * system.rows().next_power_of_two() as u64;
        assert_eq!(prover.host_bytes_a_proof(&recorded), read_back);
        let full = wgpu_groth16::groth16::synthesis::synthesize(circuit()).unwrap();
        assert!(prover.host_bytes_a_proof(&full) > read_back);
    }
}

/// Two batches at once on one device whose plan holds one proof's buffers (as two daemon
/// lanes share a GPU), its plan keeping a proof's vectors as `mode` says (within the
/// smallest budget that plans so): every proof waits for the
/// device's one proof slot, none fails over to the CPU, and the pool never counts more than
/// the budget.
fn concurrent_batches_share_one_proof_slot(mode: ProofBuffers) {
    let Some((engine, _one_at_a_time)) = budget_engine() else {
        return;
    };
    let params = params_for(FilecoinLike::blank(10).unwrap(), 21);
    let gpu = engine.gpu_engine().expect("a GPU engine");
    let budget = smallest_budget_planning(gpu, &params, mode);
    gpu.set_vram_budget(budget);
    gpu.pool().reset_peak();
    let timeline = Arc::new(Timeline::new());
    let prover = Prover::with_engine(&params, engine.clone())
        .unwrap()
        .with_workers(3)
        .with_timeline(timeline.clone());
    let plan = prover.plan().unwrap().clone();
    assert_eq!(plan.proof, mode, "{plan:?}");
    assert_eq!(plan.proofs_in_flight, 1, "the test needs one slot");
    let system = Arc::new(RecordedSystem::record(FilecoinLike::blank(10).unwrap()).unwrap());
    let batch = |first: u64| {
        let circuits: Vec<_> = (first..first + 3)
            .map(|seed| FilecoinLike::new(10, seed).unwrap())
            .collect();
        let rs: Vec<Scalar> = (0..3)
            .map(|i| Scalar::random(rng(first + 200 + i)))
            .collect();
        let ss: Vec<Scalar> = (0..3)
            .map(|i| Scalar::random(rng(first + 300 + i)))
            .collect();
        let expected = create_proof_batch(circuits.clone(), &params, rs.clone(), ss.clone())
            .unwrap()
            .iter()
            .map(proof_bytes)
            .collect::<Vec<_>>();
        // With the scalars on the host, the recorded path: products on the CPU.
        let ours = match mode {
            ProofBuffers::Resident => prover.prove_batch(circuits, &rs, &ss).unwrap(),
            _ => {
                let never = CancelToken::new();
                let batch = std::slice::from_ref(&prover);
                prove_batch_recorded_across(batch, circuits, &system, &rs, &ss, &never)
                    .unwrap()
                    .0
            }
        };
        assert_eq!(ours.iter().map(proof_bytes).collect::<Vec<_>>(), expected);
    };
    std::thread::scope(|scope| {
        scope.spawn(|| batch(0));
        scope.spawn(|| batch(10));
    });
    assert!(!engine.gpu_failed(), "proved on the GPU");
    let peak = gpu.pool().stats().peak_bytes;
    assert!(
        peak <= budget,
        "{peak} bytes counted at once, budget {budget}"
    );
    // From its staging (or, where its scalars stay on the host, its H step) to its last
    // MSM a proof holds its buffers: never two at once. A lane proves one proof at a time.
    let mut spans = timeline.spans();
    spans.sort_by_key(|span| span.start);
    // B's G2 MSM runs on a lane of its own beside the G1 MSMs where G2's bases stream.
    use wgpu_groth16::groth16::report::proof_lane;
    let mut holding = std::collections::HashSet::new();
    let mut events: Vec<(std::time::Duration, i32)> = Vec::new();
    for span in spans {
        let name = span.name.as_str();
        if name == Step::Staging.label() || name == Step::HStep.label() {
            if holding.insert(span.lane.clone()) {
                events.push((span.start, 1));
            }
        } else if name == Step::MsmBG2.label() && holding.remove(proof_lane(&span.lane)) {
            events.push((span.end, -1));
        }
    }
    assert_eq!(events.len(), 12, "six proofs");
    events.sort_by_key(|&(at, change)| (at, change));
    let most = events
        .iter()
        .scan(0, |open, &(_, change)| {
            *open += change;
            Some(*open)
        })
        .max();
    assert_eq!(most, Some(1), "proofs holding buffers at once");
}

#[test]
fn concurrent_batches_share_one_proof_slot_with_scalars_on_the_device() {
    concurrent_batches_share_one_proof_slot(ProofBuffers::Resident);
}

#[test]
fn concurrent_batches_share_one_proof_slot_with_scalars_on_the_host() {
    concurrent_batches_share_one_proof_slot(ProofBuffers::ScalarsStreamed);
}

#[test]
fn the_pool_does_not_grow_over_fifty_proofs() {
    let Some((engine, _one_at_a_time)) = budget_engine() else {
        return;
    };
    let params = params_for(SingleConstraint::blank(), 15);
    let prover = Prover::with_engine(&params, engine.clone()).unwrap();
    let gpu = engine.gpu_engine().expect("a GPU engine");
    let circuit = SingleConstraint::new(Scalar::from(5u64), Scalar::from(6u64));
    let expected = create_proof(circuit.clone(), &params, Scalar::ONE, Scalar::ONE).unwrap();
    let mut after_first = None;
    for _ in 0..50 {
        let proof = prover
            .prove(circuit.clone(), Scalar::ONE, Scalar::ONE)
            .unwrap();
        assert_eq!(proof_bytes(&proof), proof_bytes(&expected));
        let allocated = gpu.pool().stats().allocated_bytes;
        assert!(allocated <= BUDGET);
        // This proof's vectors are a few hundred bytes; its MSM workspaces ~0.6 MiB.
        assert!(
            allocated > 256 << 10,
            "the MSM workspaces count against the budget: {allocated}"
        );
        assert_eq!(
            *after_first.get_or_insert(allocated),
            allocated,
            "the pool grew"
        );
    }
}

#[test]
fn a_batch_over_workers_and_devices_equals_bellperson() {
    let params = params_for(FilecoinLike::blank(9).unwrap(), 16);
    let circuits: Vec<_> = (0..7)
        .map(|seed| FilecoinLike::new(9, seed).unwrap())
        .collect();
    let rs: Vec<Scalar> = (0..7).map(|i| Scalar::random(rng(90 + i))).collect();
    let ss: Vec<Scalar> = (0..7).map(|i| Scalar::random(rng(100 + i))).collect();
    let expected = create_proof_batch(circuits.clone(), &params, rs.clone(), ss.clone()).unwrap();
    let expected: Vec<_> = expected.iter().map(proof_bytes).collect();
    // Every engine as one device with three workers, then all engines as devices of one
    // batch (the CPU engine standing in for a second GPU).
    let provers: Vec<Prover> = engines()
        .into_iter()
        .map(|engine| {
            Prover::with_engine(&params, engine)
                .unwrap()
                .with_workers(3)
        })
        .collect();
    for prover in &provers {
        let (proofs, _) = prover
            .prove_batch_report(circuits.clone(), &rs, &ss)
            .unwrap();
        assert_eq!(proofs.iter().map(proof_bytes).collect::<Vec<_>>(), expected);
    }
    let timeline = Arc::new(Timeline::new());
    let provers: Vec<Prover> = provers
        .into_iter()
        .map(|p| p.with_timeline(timeline.clone()))
        .collect();
    let (proofs, report) =
        prove_batch_across(&provers, circuits, &rs, &ss, &CancelToken::new()).unwrap();
    assert_eq!(proofs.iter().map(proof_bytes).collect::<Vec<_>>(), expected);
    assert_eq!(report.proofs, 7);
    let lanes: std::collections::BTreeSet<String> = timeline
        .spans()
        .into_iter()
        .filter(|s| s.name.starts_with("prove "))
        .map(|s| s.lane)
        .collect();
    assert!(lanes.iter().all(|l| l.starts_with("device ")), "{lanes:?}");
}

#[test]
fn provers_of_one_batch_must_share_parameters() {
    let (one, other) = (
        params_for(SingleConstraint::blank(), 17),
        params_for(SingleConstraint::blank(), 18),
    );
    let cpu = || Arc::new(ProverEngine::cpu());
    let provers = [
        Prover::with_engine(&one, cpu()).unwrap(),
        Prover::with_engine(&other, cpu()).unwrap(),
    ];
    let circuit = SingleConstraint::new(Scalar::ONE, Scalar::ONE);
    let Err(err) = prove_batch_across(
        &provers,
        vec![circuit],
        &[Scalar::ONE],
        &[Scalar::ONE],
        &CancelToken::new(),
    ) else {
        panic!("a batch over provers of two parameter sets must be refused");
    };
    assert!(
        matches!(&err, Error::InvalidInput(m) if m.contains("prover 1")),
        "{err}"
    );
}

/// `inner`, telling `synthesizing` when its synthesis begins.
#[derive(Clone)]
struct Signalling<C> {
    inner: C,
    synthesizing: std::sync::mpsc::SyncSender<()>,
}

impl<C: Circuit<Scalar>> Circuit<Scalar> for Signalling<C> {
    fn synthesize<CS: bellperson::ConstraintSystem<Scalar>>(
        self,
        cs: &mut CS,
    ) -> Result<(), bellperson::SynthesisError> {
        let _ = self.synthesizing.try_send(());
        self.inner.synthesize(cs)
    }
}

#[test]
fn a_prover_whose_parameters_load_meanwhile_synthesizes_first_and_proves_the_same() {
    let x = Scalar::from(3u64);
    let (circuit, blank) = (SingleConstraint::new(x, x * x), SingleConstraint::blank());
    let params = params_for(blank, 41);
    let (r, s) = (Scalar::random(rng(42)), Scalar::random(rng(43)));
    let expected = create_proof(circuit.clone(), &params, r, s).expect("bellperson proof");
    for engine in engines() {
        // The loader hands the parameters over only once synthesis has begun: a prover that
        // waited for them first would fail here instead of hanging.
        let (synthesizing, begun) = std::sync::mpsc::sync_channel(1);
        let loaded = ProvingParameters::from(&params);
        let prover = Prover::loading(engine.clone(), move || {
            begun
                .recv_timeout(std::time::Duration::from_secs(20))
                .map_err(|_| Error::Internal("synthesis did not begin while loading".into()))?;
            Ok(loaded)
        })
        .expect("prover");
        let signalling = Signalling {
            inner: circuit.clone(),
            synthesizing,
        };
        let proof = prover.prove(signalling, r, s).expect("our proof");
        assert_eq!(
            proof_bytes(&proof),
            proof_bytes(&expected),
            "{}",
            engine.describe()
        );
        assert_eq!(prover.params().expect("loaded").vk, params.vk);
    }
}

#[test]
fn a_failed_load_fails_every_proof_with_its_reason() {
    let x = Scalar::from(3u64);
    let circuit = SingleConstraint::new(x, x * x);
    let prover = Prover::loading(Arc::new(ProverEngine::cpu()), || {
        Err(Error::ParamsFormat("a broken file".into()))
    })
    .expect("prover");
    let (r, s) = (Scalar::ONE, Scalar::ONE);
    match prover.prove(circuit.clone(), r, s) {
        Err(Error::ParamsFormat(why)) => assert_eq!(why, "a broken file"),
        other => panic!("the loader's error expected, got {other:?}"),
    }
    match prover.prove(circuit, r, s) {
        Err(Error::ParamsLoad(why)) => assert!(why.contains("a broken file"), "{why}"),
        other => panic!("the load's failure expected, got {other:?}"),
    }
}

/// Where the window buckets outweigh the rest of the MSM workspaces (2^18 points here), the
/// footprint offers capped bucket arrays at every chunk size, each keeping less, and a
/// budget that holds one proof only with one of them plans narrower windows.
#[test]
fn buckets_over_the_budget_plan_narrower_windows() {
    let Some((engine, _one_at_a_time)) = budget_engine() else {
        return;
    };
    let n = 1 << 18;
    let shape = Shape {
        constraints: n - 1,
        inputs: 2,
        aux: n,
        a_aux_density: n,
        b_input_density: 1,
        b_aux_density: n / 2,
    };
    let params = ProvingParameters::random_for_shape(&shape, 23);
    let gpu = engine.gpu_engine().expect("a GPU engine");
    let footprint = gpu.footprint(&params, Default::default()).unwrap();
    let (widest, capped): (Vec<&ChunkOption>, Vec<&ChunkOption>) = footprint
        .chunks
        .iter()
        .partition(|option| option.bucket_bytes == u64::MAX);
    let smallest_widest = widest.iter().map(|option| option.kept).min().unwrap();
    assert!(!capped.is_empty(), "{footprint:?}");
    // At each chunk size, each capped option keeps less than the one before it.
    for (i, option) in footprint.chunks.iter().enumerate() {
        let before = footprint.chunks[..i]
            .iter()
            .filter(|earlier| earlier.points == option.points);
        for earlier in before {
            assert!(
                option.kept < earlier.kept && option.bucket_bytes < earlier.bucket_bytes,
                "{footprint:?}"
            );
        }
    }
    let narrowest = footprint.chunks.last().unwrap();
    assert!(footprint.chunks.iter().all(|o| o.kept >= narrowest.kept));
    assert!(narrowest.kept < smallest_widest);
    let streams = 2 * (narrowest.points[0] * 96 + narrowest.points[1] * 192) as u64;
    let budget = narrowest.kept + streams + footprint.h_in_parts;
    assert!(budget < smallest_widest + footprint.h_in_parts);
    let plan = DevicePlan::new(&footprint, budget, 1).unwrap();
    assert!(plan.bucket_bytes < u64::MAX, "{plan:?}");
    assert!(plan.kept_bytes + plan.proof_bytes <= budget, "{plan:?}");
}

/// Where the plan keeps the scalars (and, in parts, the H step's vectors) in host memory, a
/// proof holds a, b, c, the A and B scalars and two read-back vectors beside its circuit: a
/// batch sets them aside from its host budget before it sizes how many circuits it
/// synthesizes ahead.
#[test]
fn a_batch_sets_aside_the_host_memory_of_proofs_whose_scalars_stay_on_the_host() {
    let Some((engine, _one_at_a_time)) = budget_engine() else {
        return;
    };
    let params = params_for(FilecoinLike::blank(10).unwrap(), 25);
    let gpu = engine.gpu_engine().expect("a GPU engine");
    gpu.set_vram_budget(smallest_budget_planning(
        gpu,
        &params,
        ProofBuffers::HInParts,
    ));
    let system = Arc::new(RecordedSystem::record(FilecoinLike::blank(10).unwrap()).unwrap());
    let circuits: Vec<_> = (0..4)
        .map(|seed| FilecoinLike::new(10, seed).unwrap())
        .collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let witness = system
        .witness_assignment(circuits[0].clone(), &pool)
        .unwrap();
    let prover = Prover::with_engine(&params, engine.clone()).unwrap();
    assert_eq!(prover.workers(), 1);
    let rows = system.rows();
    let selected = witness.input_assignment.len()
        + witness.a_aux_density.total()
        + witness.b_input_density.total()
        + witness.b_aux_density.total();
    // a computed from the witness, b's and c's transforms read back (b and c computed
    // from it are dropped once uploaded), the A and B scalars.
    let a_proof = 32 * (rows + 2 * rows.next_power_of_two() + selected) as u64;
    assert_eq!(prover.host_bytes_a_proof(&witness), a_proof);
    // Of the default budget (a share of what is available), the same share.
    assert_eq!(prover.host_budget_for_proofs(a_proof), a_proof / 2);

    // Room for the proof's bytes and two circuits: never more than two synthesized and not
    // yet proved (without the set-aside, all four were).
    let in_flight = Arc::new(std::sync::Mutex::new((0usize, 0usize)));
    let seen = in_flight.clone();
    let prover = prover.with_host_budget(Some(a_proof + 2 * witness.host_bytes()));
    assert_eq!(
        prover.host_budget_for_proofs(a_proof),
        a_proof,
        "all of a budget set"
    );
    let prover = prover.with_progress(Arc::new(move |event| {
        let mut counts = seen.lock().unwrap();
        match event {
            BatchProgress::Synthesized { .. } => counts.0 += 1,
            BatchProgress::Proved { .. } => counts.0 -= 1,
        }
        counts.1 = counts.1.max(counts.0);
    }));
    let rs: Vec<Scalar> = (0..4).map(|i| Scalar::random(rng(400 + i))).collect();
    let ss: Vec<Scalar> = (0..4).map(|i| Scalar::random(rng(500 + i))).collect();
    let never = CancelToken::new();
    let batch = std::slice::from_ref(&prover);
    prove_batch_recorded_across(batch, circuits, &system, &rs, &ss, &never).unwrap();
    let most = in_flight.lock().unwrap().1;
    assert!((1..=2).contains(&most), "{most} circuits held at once");
}
