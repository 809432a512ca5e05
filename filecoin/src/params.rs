//! A proof's parameter files, found where filecoin-proofs finds them:
//! `$FIL_PROOFS_PARAMETER_CACHE` (default `/var/tmp/filecoin-proof-parameters`), named by the
//! stack's own cache identifier of the proof's public parameters. Nothing is downloaded or
//! generated: a missing file is an error naming it.

use std::path::{Path, PathBuf};

use filecoin_proofs::types::MerkleTreeTrait;
use std::sync::{mpsc, Arc, OnceLock};
use std::time::{Duration, Instant};

use filecoin_proofs_api::{RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof};
use storage_proofs_core::parameter_cache::{
    parameter_cache_params_path, parameter_cache_srs_key_path, parameter_cache_verifying_key_path,
    CacheableParameters,
};
use storage_proofs_update::constants::TreeRHasher;
use storage_proofs_update::{EmptySectorUpdateCircuit, EmptySectorUpdateCompound};

use blstrs::{G1Affine, G2Affine};
use wgpu_groth16::groth16::params::{CpuCurveCheck, CurveCheck, Invalid};
use wgpu_groth16::groth16::{
    CheckRecords, Checked, Prover, ProverEngine, ProvingParameters, PublishedDigests,
};
use wgpu_groth16::sparse::MatrixBytes;
use wgpu_groth16::subgroup::GpuCurveCheck;

use crate::error::sector_size_name;
use crate::{Error, Result};

/// When a prover's parameters were ready: read and checked (uploading their bases to the
/// device follows).
#[derive(Clone, Copy, Debug)]
pub struct ParamsReady {
    pub read: Duration,
    pub checked: Checked,
}

/// The digests filecoin-proofs publishes for the trusted setup's files (its
/// `parameters.json`, in `published-digests.txt`).
pub fn published_digests() -> Arc<PublishedDigests> {
    static PUBLISHED: OnceLock<Arc<PublishedDigests>> = OnceLock::new();
    PUBLISHED
        .get_or_init(|| {
            let table = include_str!("published-digests.txt");
            // Tested to parse: an error here would only cost the setup's files their
            // checks' skip.
            Arc::new(PublishedDigests::parse(table).unwrap_or_else(|e| {
                log::error!("{e}");
                PublishedDigests::default()
            }))
        })
        .clone()
}

/// The `.params` and `.vk` paths a filecoin-proofs config names for sectors of `size` bytes
/// (`PoRepConfig` and `PoStConfig` name them alike, with no trait in common).
macro_rules! cache_paths {
    ($config:expr, $size:expr) => {{
        let config = $config;
        with_tree!($size, Tree => (|| -> anyhow::Result<(PathBuf, PathBuf)> {
            Ok((
                config.get_cache_params_path::<Tree>()?,
                config.get_cache_verifying_key_path::<Tree>()?,
            ))
        })())
    }};
}

/// The files one registered proof (seal, PoSt or update) needs.
#[derive(Clone, Debug)]
pub struct ParamsFiles {
    /// The registered proof, as filecoin-proofs-api names it.
    pub proof: String,
    pub sector_size: u64,
    /// The Groth16 proving parameters (`v28-....params`).
    pub params: PathBuf,
    /// Its verifying key (`.vk`).
    pub vk: PathBuf,
    /// The aggregation SRS, for non-interactive PoRep only.
    pub srs: Option<PathBuf>,
}

/// Reads a prover's parameters, on the prover's loader thread.
type ParamsLoad = Box<dyn FnOnce() -> wgpu_groth16::Result<ProvingParameters> + Send>;

impl ParamsFiles {
    /// Where the files of seal proof `proof` are (whether or not they exist).
    pub fn seal(proof: RegisteredSealProof) -> Result<Self> {
        let (params, vk) = cache_paths!(proof.as_v1_config(), u64::from(proof.sector_size()))?;
        let non_interactive = proof
            .as_v1_config()
            .feature_enabled(filecoin_proofs_api::ApiFeature::NonInteractivePoRep);
        Ok(ParamsFiles {
            proof: format!("{proof:?}"),
            sector_size: u64::from(proof.sector_size()),
            params,
            vk,
            srs: non_interactive.then(|| parameter_cache_srs_key_path("", 0)),
        })
    }

    /// Where the files of PoSt proof `proof` are.
    pub fn post(proof: RegisteredPoStProof) -> Result<Self> {
        let (params, vk) = cache_paths!(proof.as_v1_config(), u64::from(proof.sector_size()))?;
        Ok(ParamsFiles {
            proof: format!("{proof:?}"),
            sector_size: u64::from(proof.sector_size()),
            params,
            vk,
            srs: None,
        })
    }

    /// Where the files of update proof `proof` are.
    pub fn update(proof: RegisteredUpdateProof) -> Result<Self> {
        fn id<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
            proof: RegisteredUpdateProof,
        ) -> String {
            let public_params = storage_proofs_update::PublicParams::from_sector_size(u64::from(
                proof.sector_size(),
            ));
            <EmptySectorUpdateCompound<Tree> as CacheableParameters<
                EmptySectorUpdateCircuit<Tree>,
                _,
            >>::cache_identifier(&public_params)
        }
        let id = with_tree!(u64::from(proof.sector_size()), Tree => id::<Tree>(proof));
        Ok(ParamsFiles {
            proof: format!("{proof:?}"),
            sector_size: u64::from(proof.sector_size()),
            params: parameter_cache_params_path(&id),
            vk: parameter_cache_verifying_key_path(&id),
            srs: None,
        })
    }

    /// Every file is there, as a regular file.
    pub fn check_present(&self) -> Result<()> {
        self.require("Groth16 parameters", &self.params)?;
        self.check_verifying_key()?;
        match &self.srs {
            Some(srs) => self.require("aggregation SRS", srs),
            None => Ok(()),
        }
    }

    /// The verifying key is there (all `verify_seal` needs).
    pub fn check_verifying_key(&self) -> Result<()> {
        self.require("verifying key", &self.vk)
    }

    fn require(&self, kind: &'static str, path: &Path) -> Result<()> {
        if path.is_file() {
            return Ok(());
        }
        Err(Error::ParamsMissing {
            kind,
            proof: self.proof.clone(),
            sector: sector_size_name(self.sector_size),
            path: path.into(),
        })
    }

    /// The error for a parameter file that is there but wrong.
    pub fn wrong(&self, path: &Path, reason: impl Into<String>) -> Error {
        Error::ParamsWrong {
            path: path.into(),
            proof: self.proof.clone(),
            sector: sector_size_name(self.sector_size),
            reason: reason.into(),
        }
    }

    /// Reads the proving parameters, every point checked, the subgroup checks once per
    /// content ([`CheckRecords::default_location`]) and not at all for the setup's own
    /// files, known by the digests filecoin-proofs publishes ([`published_digests`]); where
    /// they run, by `check`.
    pub fn read_params(
        &self,
        check: &dyn CurveCheck,
    ) -> wgpu_groth16::Result<(ProvingParameters, Checked)> {
        let records = CheckRecords::default_location().with_published(published_digests());
        ProvingParameters::read_checked_once_with(&self.params, &records, check)
    }

    /// A prover on `engine` that starts at once while its parameters are read on a thread
    /// of their own (and their bases go to the device as the engine's plan says): a proof
    /// synthesizes meanwhile and waits for them only when it needs them. The second value
    /// holds when they were ready, once they are.
    pub fn prover(
        &self,
        engine: Arc<ProverEngine>,
    ) -> Result<(Prover, Arc<OnceLock<ParamsReady>>)> {
        self.loading_prover(EngineCheck::new(&engine), |load| {
            Prover::loading(engine, load)
        })
    }

    /// [`prover`](Self::prover) whose plan waits for the recorded system's matrix bytes on
    /// `matrices` ([`Prover::loading_for`]) and sets room aside for them before bases.
    pub fn prover_for(
        &self,
        engine: Arc<ProverEngine>,
        matrices: mpsc::Receiver<MatrixBytes>,
    ) -> Result<(Prover, Arc<OnceLock<ParamsReady>>)> {
        self.loading_prover(EngineCheck::new(&engine), |load| {
            Prover::loading_for(engine, matrices, load)
        })
    }

    fn loading_prover(
        &self,
        check: Arc<EngineCheck>,
        loading: impl FnOnce(ParamsLoad) -> wgpu_groth16::Result<Prover>,
    ) -> Result<(Prover, Arc<OnceLock<ParamsReady>>)> {
        self.check_present()?;
        let files = self.clone();
        let ready = Arc::new(OnceLock::new());
        let told = ready.clone();
        let start = Instant::now();
        let prover = loading(Box::new(move || {
            let (params, checked) = files.read_params(check.as_ref())?;
            let _ = told.set(ParamsReady {
                read: start.elapsed(),
                checked,
            });
            Ok(params)
        }))?;
        Ok((prover, ready))
    }

    /// A prover error, naming the parameter file when the parameters are at fault.
    pub fn params_error(&self, error: wgpu_groth16::Error) -> Error {
        use wgpu_groth16::Error as E;
        match error {
            E::ParamsTruncated { .. }
            | E::ParamsInvalidPoint { .. }
            | E::ParamsFormat(_)
            | E::ParamsMismatch(_)
            | E::ParamsLoad(_) => self.wrong(&self.params, error.to_string()),
            other => Error::Prover(other),
        }
    }
}

/// Where a prover on an engine checks its parameters' points: its GPU's kernels, built when
/// points first need checking (a file already recorded as checked needs none, and a fresh
/// process then compiles nothing for it); the CPU where the engine has no GPU, a software
/// one, or kernels that do not build.
struct EngineCheck {
    engine: Arc<ProverEngine>,
    on_gpu: OnceLock<Option<Arc<GpuCurveCheck>>>,
}

impl EngineCheck {
    fn new(engine: &Arc<ProverEngine>) -> Arc<Self> {
        Arc::new(EngineCheck {
            engine: engine.clone(),
            on_gpu: OnceLock::new(),
        })
    }

    fn checker(&self) -> &dyn CurveCheck {
        let on_gpu = self.on_gpu.get_or_init(|| {
            let gpu = self.engine.gpu_engine()?;
            gpu.curve_check().unwrap_or_else(|e| {
                log::warn!(
                    "the curve and subgroup checks do not build on {} ({e}): checking on the CPU",
                    gpu.gpu().describe()
                );
                None
            })
        });
        match on_gpu {
            Some(check) => check.as_ref(),
            None => &CpuCurveCheck,
        }
    }
}

type Found = wgpu_groth16::Result<Option<(usize, Invalid)>>;

impl CurveCheck for EngineCheck {
    fn first_invalid_g1(&self, points: &[G1Affine]) -> Found {
        self.checker().first_invalid_g1(points)
    }

    fn first_invalid_g2(&self, points: &[G2Affine]) -> Found {
        self.checker().first_invalid_g2(points)
    }

    fn describe(&self) -> String {
        self.checker().describe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line of the table parses, and the files the stack names for each sector size's
    /// seal, PoSt and update proofs are all in it: the cache identifiers this crate computes
    /// are the setup's file names.
    #[test]
    fn the_published_digests_name_every_proofs_files() {
        let table = include_str!("published-digests.txt");
        let lines = table
            .lines()
            .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
            .count();
        let published = published_digests();
        assert_eq!(published.len(), lines);
        let name = |path: &Path| path.file_name().unwrap().to_str().unwrap().to_string();
        let mut files = Vec::new();
        for proof in [
            RegisteredSealProof::StackedDrg2KiBV1_1,
            RegisteredSealProof::StackedDrg8MiBV1_1,
            RegisteredSealProof::StackedDrg512MiBV1_1,
            RegisteredSealProof::StackedDrg32GiBV1_1,
            RegisteredSealProof::StackedDrg64GiBV1_1,
        ] {
            files.push(ParamsFiles::seal(proof).unwrap());
        }
        for proof in [
            RegisteredPoStProof::StackedDrgWinning2KiBV1,
            RegisteredPoStProof::StackedDrgWinning32GiBV1,
            RegisteredPoStProof::StackedDrgWindow2KiBV1_2,
            RegisteredPoStProof::StackedDrgWindow32GiBV1_2,
            RegisteredPoStProof::StackedDrgWindow64GiBV1_2,
        ] {
            files.push(ParamsFiles::post(proof).unwrap());
        }
        for proof in [
            RegisteredUpdateProof::StackedDrg2KiBV1,
            RegisteredUpdateProof::StackedDrg32GiBV1,
        ] {
            files.push(ParamsFiles::update(proof).unwrap());
        }
        for files in files {
            for path in [&files.params, &files.vk] {
                assert!(
                    published.get(&name(path)).is_some(),
                    "{}: {} is not published",
                    files.proof,
                    name(path)
                );
            }
        }
        assert!(
            PublishedDigests::parse("name 0123").is_err(),
            "a short digest"
        );
        assert!(PublishedDigests::parse("name").is_err(), "no digest");
    }
}
