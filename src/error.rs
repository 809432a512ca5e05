//! The crate's error type: every failure a caller can act on, with a message that says how.

use std::fmt;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No adapter matched the selection (or none exists at all).
    #[error(
        "no GPU adapter with compute shaders found ({selection}). Install a Vulkan driver (for a software adapter: \
         `apt-get install mesa-vulkan-drivers`), relax WGPU_BACKEND / WGPU_ADAPTER_NAME, \
         or use the CPU path (BELLMAN_NO_GPU=1)"
    )]
    NoAdapter { selection: String },

    /// Fewer adapters matched the selection than were asked for.
    #[error("{asked} GPUs asked for, but the selection ({selection}) has {found} adapter(s)")]
    TooFewAdapters {
        asked: usize,
        found: usize,
        selection: String,
    },

    /// An environment variable or option names something that does not exist.
    #[error("invalid {name}={value:?}: {expected}")]
    InvalidSetting {
        name: &'static str,
        value: String,
        expected: &'static str,
    },

    /// The adapter refused to create a device with the limits and features we asked for.
    #[error("adapter {adapter:?} refused a device: {source}")]
    RequestDevice {
        adapter: String,
        #[source]
        source: wgpu::RequestDeviceError,
    },

    /// A shader variant needs a feature the device lacks.
    #[error(
        "shader variant {variant} needs the {feature} feature, which adapter {adapter:?} lacks"
    )]
    MissingFeature {
        variant: String,
        feature: &'static str,
        adapter: String,
    },

    /// The driver rejected a shader or pipeline (validation error or compiler failure).
    #[error("pipeline {label} failed to build: {message}")]
    Pipeline { label: String, message: String },

    /// The device was lost (driver reset, hang, out of memory) or an operation on it failed.
    #[error("GPU device error: {0}")]
    Device(String),

    /// A request exceeds what the device can bind or allocate.
    #[error("{what} needs {needed} bytes, but the device allows at most {limit} bytes")]
    TooLarge {
        what: &'static str,
        needed: u64,
        limit: u64,
    },

    /// A kernel would loop longer in one invocation than a software adapter runs it.
    #[error(
        "{what} makes {trips} loop trips in one invocation, but a software adapter \
         (llvmpipe) stops an invocation's loops at {limit} and would return a wrong result"
    )]
    LoopCap {
        what: String,
        trips: u64,
        limit: u32,
    },

    /// A GPU result disagreed with the CPU reference: a driver or kernel bug.
    #[error("GPU result differs from the CPU reference: {0}")]
    WrongResult(String),

    /// The device could not allocate what a step needs.
    #[error("the GPU is out of memory allocating {what} ({bytes} bytes): {message}; use a smaller problem, fewer chunks in flight, or the CPU path")]
    OutOfMemory {
        what: String,
        bytes: u64,
        message: String,
    },

    /// The device memory budget cannot hold what one proof needs.
    #[error("the VRAM budget of {budget} bytes cannot hold {what} ({needed} bytes needed); raise the budget or prove smaller circuits")]
    VramBudget {
        what: String,
        needed: u64,
        budget: u64,
    },

    /// Inputs that do not fit together (lengths, shapes).
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// A failure of this crate's own making (a thread that could not start, a result that
    /// never arrived): a bug to report, not something the CPU path would avoid.
    #[error("internal error: {0}")]
    Internal(String),

    /// The circuit itself failed while synthesizing (missing assignment, division by zero...).
    #[error("circuit synthesis failed: {0}")]
    Synthesis(#[from] bellperson::SynthesisError),

    /// A batch holds circuits of different shapes; one parameter set cannot prove them all.
    #[error("circuit {index} of the batch has shape {found}, circuit 0 has {expected}: a batch must hold circuits of one shape")]
    BatchShape {
        index: usize,
        expected: String,
        found: String,
    },

    /// A parameters file could not be opened or read.
    #[error("cannot read parameters file {path}: {source}")]
    ParamsIo {
        path: String,
        #[source]
        source: std::io::Error,
    },

    /// A parameters file ends before the data its counts announce.
    #[error("parameters file is truncated in section {section}: it needs {needed} bytes from offset {offset}, the file has {available}")]
    ParamsTruncated {
        section: &'static str,
        offset: u64,
        needed: u64,
        available: u64,
    },

    /// A point in the parameters is malformed, off the curve, outside the subgroup, or the
    /// identity where bellperson forbids it.
    #[error("parameters section {section}, point {index}: {reason}")]
    ParamsInvalidPoint {
        section: &'static str,
        index: usize,
        reason: String,
    },

    /// Any other malformation of a parameters file (trailing bytes, impossible counts).
    #[error("malformed parameters: {0}")]
    ParamsFormat(String),

    /// The parameters were made for another circuit (lengths that do not match its shape).
    #[error("parameters do not fit the circuit: {0}")]
    ParamsMismatch(String),

    /// A circuit run against a recorded constraint system allocates or constrains otherwise
    /// than the circuit it was recorded from.
    #[error("the circuit's structure differs from its recorded constraint system: {0}")]
    CircuitStructure(String),

    /// A recorded constraint system's file that cannot be written or read, or is not the
    /// one asked for (truncated, damaged, another format version, another circuit's).
    #[error("recorded constraint system file {path}: {reason}")]
    RecordedFile { path: String, reason: String },

    /// A prover's parameters failed to load on its loader thread (the first proof that
    /// waited got the error itself).
    #[error("the prover's parameters failed to load: {0}")]
    ParamsLoad(String),

    /// A file that cannot be read or written.
    #[error("cannot {action} {path}: {source}")]
    File {
        action: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },

    /// Outputs that cannot be written as named (two names for one file, a folder where a
    /// file should be): refused before any work.
    #[error("{0}")]
    Output(String),

    /// The batch was cancelled by its caller ([`crate::groth16::CancelToken`]).
    #[error("cancelled by its caller before the batch finished")]
    Cancelled,
}

impl Error {
    /// Whether this is the GPU failing (a lost device, an allocation or a pipeline refused, a
    /// wrong result), which the CPU path answers. Bad input and internal errors would meet
    /// the CPU path just the same, so they are returned instead; so is a cancellation.
    pub fn is_gpu_failure(&self) -> bool {
        !matches!(
            self,
            Error::InvalidInput(_)
                | Error::Internal(_)
                | Error::Cancelled
                | Error::File { .. }
                | Error::Output(_)
        )
    }

    pub(crate) fn file(
        action: &'static str,
        path: &std::path::Path,
        source: std::io::Error,
    ) -> Self {
        Error::File {
            action,
            path: path.display().to_string(),
            source,
        }
    }

    pub(crate) fn device(context: impl fmt::Display, err: impl fmt::Display) -> Self {
        Error::Device(format!("{context}: {err}"))
    }
}
