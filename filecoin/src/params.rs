//! A seal proof's parameter files, found where filecoin-proofs finds them:
//! `$FIL_PROOFS_PARAMETER_CACHE` (default `/var/tmp/filecoin-proof-parameters`), named by the
//! stack's own cache identifier of the proof's public parameters. Nothing is downloaded or
//! generated: a missing file is an error naming it.

use std::path::{Path, PathBuf};

use filecoin_proofs::types::MerkleTreeTrait;
use filecoin_proofs_api::RegisteredSealProof;
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage_proofs_core::parameter_cache::parameter_cache_srs_key_path;

use wgpu_groth16::groth16::{CheckRecords, Checked, Prover, ProverEngine, ProvingParameters};

use crate::error::sector_size_name;
use crate::{Error, Result};

/// When a prover's parameters were ready: read and checked (uploading their bases to the
/// device follows).
#[derive(Clone, Copy, Debug)]
pub struct ParamsReady {
    pub read: Duration,
    pub checked: Checked,
}

/// The files one registered seal proof needs.
#[derive(Clone, Debug)]
pub struct SealParamsFiles {
    pub proof: RegisteredSealProof,
    /// The Groth16 proving parameters (`v28-stacked-proof-of-replication-....params`).
    pub params: PathBuf,
    /// Its verifying key (`.vk`), for `verify_seal`.
    pub vk: PathBuf,
    /// The aggregation SRS, for non-interactive PoRep only.
    pub srs: Option<PathBuf>,
}

impl SealParamsFiles {
    /// Where the files of `proof` are (whether or not they exist).
    pub fn locate(proof: RegisteredSealProof) -> Result<Self> {
        fn paths<Tree: 'static + MerkleTreeTrait>(
            proof: RegisteredSealProof,
        ) -> anyhow::Result<(PathBuf, PathBuf)> {
            let config = proof.as_v1_config();
            Ok((
                config.get_cache_params_path::<Tree>()?,
                config.get_cache_verifying_key_path::<Tree>()?,
            ))
        }
        let (params, vk) =
            with_tree!(u64::from(proof.sector_size()), Tree => paths::<Tree>(proof))?;
        let non_interactive = proof
            .as_v1_config()
            .feature_enabled(filecoin_proofs_api::ApiFeature::NonInteractivePoRep);
        Ok(SealParamsFiles {
            proof,
            params,
            vk,
            srs: non_interactive.then(|| parameter_cache_srs_key_path("", 0)),
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
            proof: format!("{:?}", self.proof),
            sector: sector_size_name(u64::from(self.proof.sector_size())),
            path: path.into(),
        })
    }

    /// The error for a parameter file that is there but wrong.
    pub fn wrong(&self, path: &Path, reason: impl Into<String>) -> Error {
        Error::ParamsWrong {
            path: path.into(),
            proof: format!("{:?}", self.proof),
            sector: sector_size_name(u64::from(self.proof.sector_size())),
            reason: reason.into(),
        }
    }

    /// Reads the proving parameters, every point checked, the subgroup checks once per
    /// content ([`CheckRecords::default_location`]).
    pub fn read_params(&self) -> wgpu_groth16::Result<(ProvingParameters, Checked)> {
        ProvingParameters::read_mmap_checked_once(&self.params, &CheckRecords::default_location())
    }

    /// A prover on `engine` that starts at once while its parameters are read on a thread
    /// of their own (and their bases go to the device where they fit
    /// `resident_bases_budget`): a proof synthesizes meanwhile and waits for them only
    /// when it needs them. `on_ready` is told when they are ready, and how long they took.
    pub fn prover(
        &self,
        engine: Arc<ProverEngine>,
        resident_bases_budget: Option<u64>,
        on_ready: impl FnOnce(ParamsReady) + Send + 'static,
    ) -> Result<Prover> {
        self.check_present()?;
        let files = self.clone();
        let start = Instant::now();
        Ok(Prover::loading(engine, resident_bases_budget, move || {
            let (params, checked) = files.read_params()?;
            on_ready(ParamsReady {
                read: start.elapsed(),
                checked,
            });
            Ok(params)
        })?)
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
