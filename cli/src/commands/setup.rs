//! `wgpu-groth16 setup`: the built-in circuits the commands prove, and their parameters:
//! bellperson's setup, written as a `.params` and a `.vk` file, or cached for `demo` and
//! `compare`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use bellperson::groth16::generate_random_parameters;
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Scalar};
use rand_core::OsRng;
use serde_json::json;
use wgpu_groth16::files::user_cache_dir;
use wgpu_groth16::groth16::circuits::{FilecoinLike, Sha256Preimage, SizeBounds};
use wgpu_groth16::groth16::{PointCheck, ProvingParameters};

use crate::memory;
use crate::output::{stage, Output, OutputPlan};
use crate::{CliError, CliResult};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CircuitKind {
    /// Knowledge of a SHA-256 preimage (bellperson's gadgets): a real circuit.
    Sha256,
    /// 2^size - 1 constraints with a witness like Filecoin's (half of it bits).
    FilecoinLike,
}

/// Which built-in circuit, and how large.
#[derive(Clone, Debug, clap::Args)]
pub struct CircuitArgs {
    /// The built-in circuit.
    #[arg(long, value_enum, default_value = "sha256")]
    pub circuit: CircuitKind,
    /// sha256: the message length in bytes (default 32: 25,505 constraints; about 27,000 more
    /// per 64 bytes); filecoin-like: log2 of the constraint count (default 16).
    #[arg(long)]
    pub size: Option<u32>,
}

/// A built-in circuit, with or without its witness.
#[derive(Clone)]
pub enum BuiltIn {
    Sha256(Sha256Preimage),
    FilecoinLike(FilecoinLike),
}

impl Circuit<Scalar> for BuiltIn {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        match self {
            BuiltIn::Sha256(c) => c.synthesize(cs),
            BuiltIn::FilecoinLike(c) => c.synthesize(cs),
        }
    }
}

impl CircuitArgs {
    pub fn size(&self) -> u32 {
        self.size.unwrap_or(match self.circuit {
            CircuitKind::Sha256 => 32,
            CircuitKind::FilecoinLike => 16,
        })
    }

    /// "sha256-32", "filecoin-like-16": names cached parameters.
    pub fn name(&self) -> String {
        match self.circuit {
            CircuitKind::Sha256 => format!("sha256-{}", self.size()),
            CircuitKind::FilecoinLike => format!("filecoin-like-{}", self.size()),
        }
    }

    pub fn describe(&self) -> String {
        match self.circuit {
            CircuitKind::Sha256 => format!("SHA-256 preimage of {} bytes", self.size()),
            CircuitKind::FilecoinLike => format!("Filecoin-like circuit of size 2^{}", self.size()),
        }
    }

    /// What the circuit will be, before it is built; a size beyond any NTT domain is refused.
    pub fn size_bounds(&self) -> CliResult<SizeBounds> {
        let bounds = match self.circuit {
            CircuitKind::Sha256 => Sha256Preimage::blank(self.size() as usize).size_bounds(),
            CircuitKind::FilecoinLike => FilecoinLike::blank(self.size())?.size_bounds(),
        };
        bounds.check_domain(&self.describe())?;
        Ok(bounds)
    }

    /// The circuit without a witness, as the setup needs it.
    pub fn blank(&self) -> CliResult<BuiltIn> {
        Ok(match self.circuit {
            CircuitKind::Sha256 => BuiltIn::Sha256(Sha256Preimage::blank(self.size() as usize)),
            CircuitKind::FilecoinLike => BuiltIn::FilecoinLike(FilecoinLike::blank(self.size())?),
        })
    }

    /// These arguments with sha256's size taken from `message`, the preimage to prove.
    pub fn sized_for(&self, message: Option<&[u8]>) -> CliResult<CircuitArgs> {
        let (CircuitKind::Sha256, Some(message)) = (self.circuit, message) else {
            return Ok(self.clone());
        };
        if self.size.is_some_and(|size| size as usize != message.len()) {
            return Err(CliError::Invalid(format!(
                "--size {} but --message is {} bytes: for sha256 the size is the message length",
                self.size(),
                message.len()
            )));
        }
        Ok(CircuitArgs {
            size: Some(message.len() as u32),
            ..self.clone()
        })
    }

    /// The circuit with a witness: sha256 proves knowledge of `message` (see
    /// [`sized_for`](Self::sized_for)), filecoin-like draws its values from `seed`.
    pub fn with_witness(&self, message: Option<&[u8]>, seed: u64) -> CliResult<BuiltIn> {
        match self.circuit {
            CircuitKind::Sha256 => {
                let message = message.ok_or_else(|| {
                    CliError::Invalid("--circuit sha256 needs --message, the preimage".into())
                })?;
                Ok(BuiltIn::Sha256(Sha256Preimage::new(message)))
            }
            CircuitKind::FilecoinLike => {
                Ok(BuiltIn::FilecoinLike(FilecoinLike::new(self.size(), seed)?))
            }
        }
    }

    /// The circuit with the witness `demo` and `compare` prove: [`MESSAGE`] repeated to the
    /// size, or values drawn from `seed`.
    pub fn with_sample_witness(&self, seed: u64) -> CliResult<BuiltIn> {
        let message: Vec<u8> = MESSAGE
            .iter()
            .copied()
            .cycle()
            .take(self.size() as usize)
            .collect();
        self.with_witness(Some(&message), seed)
    }
}

/// The preimage `demo` proves knowledge of (32 bytes: one SHA-256 block with its padding).
const MESSAGE: &[u8] = b"wgpu-groth16: Groth16 on any GPU";

/// bellperson's setup for `circuit` (the randomness from the OS): seconds at 2^16
/// constraints, minutes at 2^20 on a few cores. A circuit whose setup cannot fit in the
/// machine's memory is refused before anything is built.
pub fn generate(circuit: &CircuitArgs) -> CliResult<(ProvingParameters, Duration)> {
    let bounds = circuit.size_bounds()?;
    let domain = *bounds.domains().start();
    let variables = bounds.inputs + bounds.aux.start();
    let constraints = *bounds.constraints.start();
    // What bellperson's generator holds at its peak: 32 bytes of powers of tau and a 96-byte
    // H point per domain point; per variable its A, B and L points affine (G1 96 bytes, G2
    // 192) and projective (G1 144, G2 288), all computed before the first is dropped; and
    // per constraint its linear combinations, 470 bytes in the peaks measured for both
    // built-in circuits (2^14 to 2^19 constraints), beyond the points.
    const PER_DOMAIN_POINT: u64 = 32 + 96;
    const PER_VARIABLE: u64 = 96 * 3 + 192 + 144 * 3 + 288;
    const PER_CONSTRAINT: u64 = 470;
    let needed = domain
        .saturating_mul(PER_DOMAIN_POINT)
        .saturating_add(variables.saturating_mul(PER_VARIABLE))
        .saturating_add(constraints.saturating_mul(PER_CONSTRAINT));
    memory::check(
        &format!("the setup of {}", circuit.describe()),
        needed,
        &format!(
            "{PER_DOMAIN_POINT} bytes for each of {domain} domain points, {PER_VARIABLE} for \
             each of {variables} variables' points, {PER_CONSTRAINT} for each of \
             {constraints} constraints"
        ),
    )?;
    let blank = circuit.blank()?;
    let (params, time) = stage("generating parameters (bellperson)", || {
        generate_random_parameters::<Bls12, _, _>(blank, &mut OsRng)
    });
    Ok((params.map_err(wgpu_groth16::Error::Synthesis)?.into(), time))
}

pub fn run(
    circuit: &CircuitArgs,
    params_path: &Path,
    vk_path: &Path,
    out: &mut Output,
) -> CliResult<ExitCode> {
    let mut plan = OutputPlan::new();
    let params_file = plan.output("--params", params_path);
    let vk_file = plan.output("--vk", vk_path);
    let mut files = plan.reserve()?;
    let (params, time) = generate(circuit)?;
    // One set: a failure leaves the previous pair, never a new .params beside an old .vk.
    files.write(params_file, |w| params.write(w))?;
    files.write(vk_file, |w| params.vk.write(w))?;
    files.commit()?;
    out.fact(
        "circuit",
        circuit.name(),
        format!("circuit: {}", circuit.describe()),
    );
    let domain = params.h.len() + 1;
    let (inputs, aux) = (params.vk.ic.len() - 1, params.l.len());
    out.fact(
        "shape",
        json!({ "domain": domain, "public_inputs": inputs, "aux": aux }),
        format!(
            "domain: 2^{}, {inputs} public inputs, {aux} auxiliary variables",
            domain.trailing_zeros()
        ),
    );
    out.fact(
        "setup_seconds",
        time.as_secs_f64(),
        format!("setup (bellperson): {time:.2?}"),
    );
    out.fact(
        "files",
        json!({
            "params": params_path.display().to_string(),
            "vk": vk_path.display().to_string(),
        }),
        format!("wrote {} and {}", params_path.display(), vk_path.display()),
    );
    Ok(ExitCode::SUCCESS)
}

/// Where `demo` and `compare` keep parameters between runs: `$WGPU_GROTH16_PARAMS_CACHE`,
/// `$XDG_CACHE_HOME/wgpu-groth16` or `~/.cache/wgpu-groth16`, one folder per version (a
/// circuit may change between them).
fn cache_dir() -> Option<PathBuf> {
    Some(user_cache_dir()?.join(env!("CARGO_PKG_VERSION")))
}

/// Parameters for `circuit` from the cache, or generated and cached: a setup takes longer
/// than the proofs. Returns them and a line saying where they came from.
pub fn cached(circuit: &CircuitArgs) -> CliResult<(ProvingParameters, String)> {
    let Some(dir) = cache_dir() else {
        let (params, time) = generate(circuit)?;
        return Ok((
            params,
            format!("generated in {time:.2?} (not cached: HOME is not set)"),
        ));
    };
    let path = dir.join(format!("{}.params", circuit.name()));
    if path.exists() {
        // Our own file, written whole: the subgroup checks are most of a checked read.
        let (params, time) = stage("reading cached parameters", || {
            ProvingParameters::read(&path, PointCheck::Unchecked)
        });
        match params {
            Ok(params) => {
                return Ok((
                    params,
                    format!("read from {} in {time:.2?}", path.display()),
                ));
            }
            Err(e) => log::warn!("regenerating the cached parameters {}: {e}", path.display()),
        }
    }
    let mut plan = OutputPlan::new();
    let slot = plan.output("the parameter cache", &path);
    let files = std::fs::create_dir_all(&dir)
        .map_err(|source| CliError::io("create", &dir, source))
        .and_then(|()| Ok(plan.reserve()?));
    let (params, time) = generate(circuit)?;
    let cached = files.and_then(|mut files| {
        files.write(slot, |w| params.write(w))?;
        Ok(files.commit()?)
    });
    let note = match cached {
        Ok(()) => format!("generated in {time:.2?}, cached in {}", path.display()),
        Err(e) => {
            // The cache only saves time: a read-only home must not stop the demo.
            log::warn!("parameters not cached: {e}");
            format!("generated in {time:.2?} (not cached)")
        }
    };
    Ok((params, note))
}
