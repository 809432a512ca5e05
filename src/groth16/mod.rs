//! Groth16 over BLS12-381: circuits in (bellperson's `Circuit`), parameters in (bellperson
//! `.params` files or in-memory `Parameters`), proofs out equal to bellperson's byte for byte.
//!
//! [`synthesis`] runs circuits into proving assignments, [`batch`] pipelines a batch
//! over workers and devices, [`params`] reads and checks
//! parameters, [`prover`] proves on
//! the GPU or the CPU, [`circuits`] holds the built-in circuits (tests, demo, benchmarks).

pub mod batch;
pub mod circuits;
pub mod params;
pub mod prover;
pub mod synthesis;

pub use params::{ParamsShape, PointCheck, ProvingParameters};
pub use prover::{
    prove, prove_batch, prove_batch_random, prove_random, Backend, ProveReport, Prover,
    ProverConfig, DEFAULT_WORKERS,
};
