//! The commands of `wgpu-groth16`, one module each (`bench_*` are `bench`'s subcommands).

pub mod bench;
pub mod bench_prove;
pub mod bench_synthesis;
pub mod compare;
pub mod demo;
pub mod info;
pub mod prove;
pub mod setup;
pub mod verify;
