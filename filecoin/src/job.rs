//! What every Filecoin SNARK shares: a job whose partitions are circuits that filecoin-proofs'
//! own `CompoundProof::circuit` builds, proved as one batch through our prover (or through
//! bellperson, to compare), each proof 192 bytes in bellperson's encoding. Our prover
//! synthesizes them from constraint systems recorded once ([`crate::recorded`]).

use std::fs;
use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use bellperson::groth16::{create_proof_batch, Parameters, Proof};
use bellperson::Circuit;
use blstrs::{Bls12, Scalar};
use rayon::prelude::*;
use storage_proofs_core::compound_proof::{CircuitComponent, CompoundProof};
use storage_proofs_core::parameter_cache::ParameterSetMetadata;
use storage_proofs_core::proof::ProofScheme;
use wgpu_groth16::groth16::batch::{prove_batch_across, prove_batch_recorded_across};
use wgpu_groth16::groth16::{CancelToken, ProveReport, Prover};
use wgpu_groth16::recorded::{Origin, RecordedKey, RecordedSystem, WitnessRun};
use wgpu_groth16::sparse::MatrixBytes;

use crate::params::ParamsFiles;
use crate::recorded::{RecordedCache, SynthesisPath};
use crate::{Error, Result};

/// Bytes of one partition's proof.
pub const PARTITION_PROOF_BYTES: usize = 192;

/// Work on a job's partition circuits, whatever their type (which the sector size and the
/// proof decide): [`ProofJob::with_circuits`] builds them and hands them over.
pub trait PartitionCircuits {
    type Output;
    fn run<C: Circuit<Scalar> + Send>(self, circuits: Vec<C>) -> Result<Self::Output>;
}

/// Work on a job's partition circuits for a witness run against a recorded constraint system:
/// each partition whole, or in parts where its circuit allows ([`ProofJob::with_witness_circuits`]).
pub trait PartitionWitnesses {
    type Output;
    fn run<W: WitnessRun>(self, circuits: Vec<W>) -> Result<Self::Output>;
}

/// A SNARK of the Filecoin stack to prove: PoRep C2, a SnapDeals update, a PoSt.
pub trait ProofJob {
    /// Partitions: one circuit, and one proof, each.
    fn partitions(&self) -> usize;

    /// The parameter files its circuits need.
    fn params_files(&self) -> Result<ParamsFiles>;

    /// Builds every partition's circuit in partition order, as filecoin-proofs does before
    /// it proves them, and hands them to `work`.
    fn with_circuits<W: PartitionCircuits>(&self, work: W) -> Result<W::Output>;

    /// What fixes the structure of the job's circuits (the registered proof, which names
    /// sector size and version, and anything else the circuit is built from that is the
    /// same for every sector), for the key of their recorded constraint system.
    fn circuit_identity(&self) -> String;

    /// Builds every partition's circuit as [`with_circuits`](Self::with_circuits) does, for
    /// a witness run against a recorded system: split into at most `parts` parts that run on
    /// several threads where the circuit's structure allows
    /// ([`CircuitParts`](wgpu_groth16::recorded::CircuitParts)), whole
    /// otherwise.
    fn with_witness_circuits<W: PartitionWitnesses>(
        &self,
        _parts: usize,
        work: W,
    ) -> Result<W::Output> {
        struct Whole<W>(W);
        impl<W: PartitionWitnesses> PartitionCircuits for Whole<W> {
            type Output = W::Output;
            fn run<C: Circuit<Scalar> + Send>(self, circuits: Vec<C>) -> Result<Self::Output> {
                self.0.run(circuits)
            }
        }
        self.with_circuits(Whole(work))
    }

    /// Hands `work` one blank partition circuit (`CompoundProof::blank_circuit`): no
    /// witness, the constraints of every partition, so the same recorded system.
    fn with_blank_circuit<W: PartitionCircuits>(&self, work: W) -> Result<W::Output>;

    /// The key of the job's recorded constraint system: its circuit identity and its
    /// parameters' verifying key. That key is read from the job's `.vk` file where there is
    /// one (bellperson's `vk.write` bytes, beside the `.params`): parameters still loading
    /// need not be waited for, so the system loads and the witness runs while they do.
    /// Otherwise the prover's own.
    fn recorded_key(&self, prover: &Prover) -> Result<RecordedKey> {
        match self.recorded_key_from_vk_file()? {
            Some(key) => Ok(key),
            None => Ok(RecordedKey::new(
                &self.circuit_identity(),
                &prover.params()?.vk,
            )?),
        }
    }

    /// [`recorded_key`](Self::recorded_key) where the `.vk` file gives it.
    fn recorded_key_from_vk_file(&self) -> Result<Option<RecordedKey>> {
        let files = self.params_files()?;
        Ok(read_small(&files.vk)
            .map(|vk| RecordedKey::from_vk_bytes(&self.circuit_identity(), &vk)))
    }

    /// The job's recorded constraint system from `cache`: kept there, read from its file,
    /// or recorded from the job's blank circuit (and written for the next process). Its
    /// matrix bytes go to `plan` once had (a prover made by [`ParamsFiles::prover_for`]
    /// waits for them); `plan` is dropped unsent where the system cannot be had, and before
    /// the key is taken from the prover's parameters where the `.vk` file is missing (their
    /// loader waits for `plan`).
    fn recorded_system(
        &self,
        cache: &RecordedCache,
        prover: &Prover,
        mut plan: Option<mpsc::Sender<MatrixBytes>>,
    ) -> Result<(RecordedKey, Arc<RecordedSystem>, SynthesisPath)> {
        let key = match self.recorded_key_from_vk_file()? {
            Some(key) => key,
            None => {
                plan = None;
                RecordedKey::new(&self.circuit_identity(), &prover.params()?.vk)?
            }
        };
        let (system, path) = self.recorded_system_of(cache, &key, plan)?;
        Ok((key, system, path))
    }

    /// [`recorded_system`](Self::recorded_system) under `key` (a caller that holds the
    /// parameters' verifying key makes it without a prover: [`RecordedKey::new`]); its
    /// matrix bytes go to `plan`.
    fn recorded_system_of(
        &self,
        cache: &RecordedCache,
        key: &RecordedKey,
        plan: Option<mpsc::Sender<MatrixBytes>>,
    ) -> Result<(Arc<RecordedSystem>, SynthesisPath)> {
        let (system, path) = cache.system(key, |dir| {
            self.with_blank_circuit(LoadOrRecord { dir, key })
        })?;
        if let Some(plan) = plan {
            let _ = plan.send(MatrixBytes::of(&system));
        }
        Ok((system, path))
    }

    /// The partitions' proofs with `rs[k]` and `ss[k]` for partition k, through `prover`
    /// (which must hold the job's parameters), from recorded constraint systems
    /// ([`RecordedCache::by_default`]). Not verified.
    fn prove_partitions(
        &self,
        prover: &Prover,
        rs: &[Scalar],
        ss: &[Scalar],
    ) -> Result<Vec<Proof<Bls12>>> {
        let never = CancelToken::new();
        Ok(self
            .prove_partitions_reporting(prover, RecordedCache::by_default(), rs, ss, &never)?
            .0)
    }

    /// [`prove_partitions`](Self::prove_partitions) with the systems of `recorded`, or by
    /// full synthesis without; how the circuits were synthesized, and the time each step of
    /// the batch took ([`ProveReport`], summed over the partitions). Matrices that cannot
    /// be had, or that the witness check finds the circuits differ from, leave full
    /// synthesis to prove them (with a warning): a proof is never made from wrong ones.
    /// Once `cancel` is cancelled the batch stops between partitions with
    /// [`wgpu_groth16::Error::Cancelled`].
    fn prove_partitions_reporting(
        &self,
        prover: &Prover,
        recorded: Option<&RecordedCache>,
        rs: &[Scalar],
        ss: &[Scalar],
        cancel: &CancelToken,
    ) -> Result<(Vec<Proof<Bls12>>, SynthesisPath, ProveReport)> {
        struct ProveRecorded<'a> {
            prover: &'a Prover,
            system: &'a Arc<RecordedSystem>,
            rs: &'a [Scalar],
            ss: &'a [Scalar],
            cancel: &'a CancelToken,
        }
        impl PartitionWitnesses for ProveRecorded<'_> {
            type Output = (Vec<Proof<Bls12>>, ProveReport);
            fn run<W: WitnessRun>(self, circuits: Vec<W>) -> Result<Self::Output> {
                let provers = std::slice::from_ref(self.prover);
                Ok(prove_batch_recorded_across(
                    provers,
                    circuits,
                    self.system,
                    self.rs,
                    self.ss,
                    self.cancel,
                )?)
            }
        }
        struct ProveFull<'a> {
            prover: &'a Prover,
            rs: &'a [Scalar],
            ss: &'a [Scalar],
            cancel: &'a CancelToken,
        }
        impl PartitionCircuits for ProveFull<'_> {
            type Output = (Vec<Proof<Bls12>>, ProveReport);
            fn run<C: Circuit<Scalar> + Send>(self, circuits: Vec<C>) -> Result<Self::Output> {
                let provers = std::slice::from_ref(self.prover);
                Ok(prove_batch_across(
                    provers,
                    circuits,
                    self.rs,
                    self.ss,
                    self.cancel,
                )?)
            }
        }
        if rs.len() != self.partitions() || ss.len() != self.partitions() {
            return Err(Error::Prover(wgpu_groth16::Error::InvalidInput(format!(
                "{} partitions need as many r and s, got {} and {}",
                self.partitions(),
                rs.len(),
                ss.len()
            ))));
        }
        let files = self.params_files()?;
        let params_error = |e| match e {
            Error::Prover(e) => files.params_error(e),
            other => other,
        };
        let why = match recorded.map(|cache| (cache, self.recorded_system(cache, prover, None))) {
            None => "requested".to_string(),
            Some((_, Err(e))) => format!("no recorded constraint system ({e})"),
            Some((cache, Ok((key, system, path)))) => {
                let recorded = ProveRecorded {
                    prover,
                    system: &system,
                    rs,
                    ss,
                    cancel,
                };
                // A partition's witness in a part a challenge: the finest split (a part
                // repeats only the public values), which the batch fills its threads from,
                // a second partition's parts beside the first's.
                match self.with_witness_circuits(usize::MAX, recorded) {
                    Ok((proofs, report)) => return Ok((proofs, path, report)),
                    Err(Error::Prover(wgpu_groth16::Error::CircuitStructure(why))) => {
                        cache.refuse(&key, &why);
                        format!("the circuits differ from their recorded constraint system ({why})")
                    }
                    Err(e) => return Err(params_error(e)),
                }
            }
        };
        if recorded.is_some() {
            log::warn!("{why}: proving by full synthesis");
        }
        let (proofs, report) = self
            .with_circuits(ProveFull {
                prover,
                rs,
                ss,
                cancel,
            })
            .map_err(params_error)?;
        Ok((proofs, SynthesisPath::Full { why }, report))
    }

    /// The partitions' proofs from bellperson's `create_proof_batch` on the same circuits,
    /// with `rs[k]` and `ss[k]` for partition k: filecoin-proofs' prover (which draws r and
    /// s inside), for comparing ours with.
    fn prove_with_bellperson(
        &self,
        params: &Parameters<Bls12>,
        rs: &[Scalar],
        ss: &[Scalar],
    ) -> Result<Vec<Proof<Bls12>>> {
        struct Bellperson<'a> {
            params: &'a Parameters<Bls12>,
            rs: &'a [Scalar],
            ss: &'a [Scalar],
        }
        impl PartitionCircuits for Bellperson<'_> {
            type Output = Vec<Proof<Bls12>>;
            fn run<C: Circuit<Scalar> + Send>(self, circuits: Vec<C>) -> Result<Self::Output> {
                create_proof_batch(circuits, self.params, self.rs.to_vec(), self.ss.to_vec())
                    .map_err(|e| Error::Stack(e.into()))
            }
        }
        self.with_circuits(Bellperson { params, rs, ss })
    }
}

/// One job of [`prove_back_to_back`]: its partitions' proofs, how they were synthesized,
/// what each step took, and when the job finished (from the call).
pub struct JobProved {
    pub proofs: Vec<Proof<Bls12>>,
    pub synthesis: SynthesisPath,
    pub report: ProveReport,
    pub finished: Duration,
}

/// `jobs` proved back to back through one prover, at most `in_flight` at once (at least
/// one), in order of their index: while one job's partitions hold the GPU, the next one's
/// witnesses are computed, as in a storage provider's queue of C2s. `randomness[k]` is job
/// k's r and s per partition. Each job's result, in order (once `cancel` is cancelled, the
/// jobs not finished end with [`wgpu_groth16::Error::Cancelled`]).
pub fn prove_back_to_back<J: ProofJob + Sync>(
    jobs: &[J],
    randomness: &[(Vec<Scalar>, Vec<Scalar>)],
    prover: &Prover,
    recorded: Option<&RecordedCache>,
    in_flight: usize,
    cancel: &CancelToken,
) -> Vec<Result<JobProved>> {
    let start = Instant::now();
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Option<Result<JobProved>>>> =
        jobs.iter().map(|_| Mutex::new(None)).collect();
    let prove = |k: usize| -> Result<JobProved> {
        let (rs, ss) = randomness.get(k).ok_or_else(|| {
            Error::Prover(wgpu_groth16::Error::InvalidInput(format!(
                "{} jobs, randomness for {}",
                jobs.len(),
                randomness.len()
            )))
        })?;
        let (proofs, synthesis, report) =
            jobs[k].prove_partitions_reporting(prover, recorded, rs, ss, cancel)?;
        Ok(JobProved {
            proofs,
            synthesis,
            report,
            finished: start.elapsed(),
        })
    };
    std::thread::scope(|scope| {
        for _ in 0..in_flight.clamp(1, jobs.len().max(1)) {
            scope.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= jobs.len() {
                    break;
                }
                let result = prove(k);
                *results[k].lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
            });
        }
    });
    results
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .unwrap_or_else(|| {
                    Err(Error::Prover(wgpu_groth16::Error::Internal(
                        "a job ended without a result".into(),
                    )))
                })
        })
        .collect()
}

/// Proofs as filecoin-proofs writes them: concatenated, 192 bytes each.
pub fn proofs_to_bytes(proofs: &[Proof<Bls12>]) -> Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(proofs.len() * PARTITION_PROOF_BYTES);
    for proof in proofs {
        proof
            .write(&mut bytes)
            .map_err(|e| Error::Stack(e.into()))?;
    }
    Ok(bytes)
}

/// The circuits `P::circuit_proofs` proves: `P::circuit` of each partition's vanilla proof,
/// in partition order.
pub fn compound_circuits<'a, S, C, P>(
    public_inputs: &S::PublicInputs,
    vanilla_proofs: &[S::Proof],
    vanilla_params: &S::PublicParams,
) -> Result<Vec<C>>
where
    S: ProofScheme<'a>,
    S::PublicInputs: Sync,
    S::Proof: Send + Sync,
    S::PublicParams: ParameterSetMetadata + Send + Sync,
    C: Circuit<Scalar> + CircuitComponent + Send,
    P: CompoundProof<'a, S, C>,
{
    vanilla_proofs
        .par_iter()
        .enumerate()
        .map(|(k, vanilla)| {
            Ok(P::circuit(
                public_inputs,
                C::ComponentPrivateInputs::default(),
                vanilla,
                vanilla_params,
                Some(k),
            )?)
        })
        .collect()
}

/// Largest `.vk` file read for a key: real ones are kilobytes.
const MAX_VK_FILE: u64 = 1 << 20;

/// A regular file of at most [`MAX_VK_FILE`] bytes; `None` for anything else.
fn read_small(path: &Path) -> Option<Vec<u8>> {
    let metadata = fs::metadata(path).ok()?;
    if !metadata.is_file() || metadata.len() > MAX_VK_FILE {
        return None;
    }
    let mut bytes = Vec::new();
    fs::File::open(path)
        .ok()?
        .take(MAX_VK_FILE)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(bytes)
}

/// Loads or records the system of the one blank circuit it is handed.
struct LoadOrRecord<'a> {
    dir: Option<&'a Path>,
    key: &'a RecordedKey,
}

impl PartitionCircuits for LoadOrRecord<'_> {
    type Output = (RecordedSystem, Origin);
    fn run<C: Circuit<Scalar> + Send>(self, mut circuits: Vec<C>) -> Result<Self::Output> {
        let blank = circuits.pop().ok_or_else(|| {
            Error::Prover(wgpu_groth16::Error::Internal(
                "no blank circuit to record".into(),
            ))
        })?;
        Ok(RecordedSystem::load_or_record(
            self.dir,
            self.key,
            move || Ok(blank),
        )?)
    }
}
