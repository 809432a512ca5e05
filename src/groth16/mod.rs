//! Groth16 over BLS12-381: circuits in (bellperson's `Circuit`), parameters in (bellperson
//! `.params` files or in-memory `Parameters`), proofs out equal to bellperson's byte for byte.
//!
//! [`synthesis`] runs circuits into proving assignments; [`params`] reads and checks
//! parameters; [`prover`] proves one synthesized circuit as one sequence of steps over the
//! [`engine`] seam (GPU or CPU, with fallback); [`batch`] pipelines a batch over workers and
//! devices and holds the `prove*` entry points; [`report`] names the steps and their times;
//! [`circuits`] holds the built-in circuits (tests, demo, benchmarks); [`cancel`] stops a
//! running batch.

pub mod batch;
pub mod cancel;
pub mod circuits;
pub mod engine;
pub mod params;
pub mod prover;
pub mod report;
pub mod synthesis;

pub use batch::{prove, prove_batch, prove_batch_random, prove_random};
pub use cancel::CancelToken;
pub use engine::{Backend, ProverConfig, ProverEngine};
pub use params::{
    CheckRecords, Checked, ParamsShape, PointCheck, ProvingParameters, PublishedDigests,
};
pub use prover::{BatchProgress, ProgressObserver, Prover, DEFAULT_WORKERS};
pub use report::{ProveReport, Step};
