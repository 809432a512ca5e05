//! wgpu-groth16: a Groth16 prover for BLS12-381 whose MSM and NTT kernels are WGSL compute
//! shaders run through wgpu.
//!
//! Layout, bottom up: [`gpu`] opens devices, validates and compiles the programs the modules
//! above declare, and holds typed device vectors, the buffer pool and the waits; [`field`]
//! is the host side of the field elements the shaders compute on, with the CPU reference
//! (blstrs) behind the same seam as the GPU kernels; [`curve`] and [`msm`] build Pippenger
//! multi-scalar multiplication for G1 and G2 on them; [`ntt`] the transforms over Fr that the
//! H polynomial needs, equal to bellperson's; [`recorded`] keeps a circuit's constraint
//! system, recorded once, and runs witnesses against it; [`sparse`] multiplies its matrices
//! with a witness on the GPU, which feeds the H step; [`subgroup`] checks that curve points lie
//! in their prime-order subgroups; [`groth16`] synthesizes bellperson circuits,
//! reads `.params` files and proves with them through one engine seam (GPU or CPU);
//! [`timeline`] records what ran where, for traces; [`files`] writes files whole or not at
//! all; [`host`] says what memory the machine has left. The command line is a crate of its
//! own (`wgpu-groth16-cli`), so that a library user links no argument parser.

pub mod curve;
pub mod error;
pub mod field;
pub mod files;
pub mod gpu;
pub mod groth16;
pub mod host;
pub mod msm;
pub mod ntt;
pub mod recorded;
pub mod sparse;
pub mod subgroup;
pub mod timeline;

pub use error::{Error, Result};
pub use groth16::engine::{msm_g1, msm_g2};

use gpu::program::ProgramInfo;

/// Every compute program of the crate, as its module declares it: what the shader tests and
/// `cargo xtask validate-shaders` check, with no GPU.
pub fn programs() -> Vec<ProgramInfo> {
    vec![
        ProgramInfo::of::<field::ops::FieldOpsProgram>(),
        ProgramInfo::of::<field::bench::FieldBenchProgram>(),
        ProgramInfo::of::<field::bench::Int64BenchProgram>(),
        ProgramInfo::of::<msm::program::ScanProgram>(),
        ProgramInfo::of::<msm::program::MsmProgram<curve::G1>>(),
        ProgramInfo::of::<msm::program::MsmProgram<curve::G2>>(),
        ProgramInfo::of::<ntt::program::NttProgram>(),
        ProgramInfo::of::<sparse::program::SparseProgram>(),
        ProgramInfo::of::<subgroup::program::SubgroupProgram<curve::G1>>(),
        ProgramInfo::of::<subgroup::program::SubgroupProgram<curve::G2>>(),
    ]
}
