//! wgpu-groth16: a Groth16 prover for BLS12-381 whose MSM and NTT kernels are WGSL compute
//! shaders run through wgpu.
//!
//! Layout: [`gpu`] opens devices and builds pipelines from the WGSL in `shaders/`;
//! [`field`] is the host side of the field elements those shaders compute on, with the CPU
//! reference (blstrs) behind the same seam as the GPU kernels; [`curve`] and [`msm`] build
//! Pippenger multi-scalar multiplication for G1 and G2 on them; [`ntt`] the transforms over
//! Fr that the H polynomial needs, equal to bellperson's; [`groth16`] synthesizes bellperson
//! circuits, reads `.params` files and proves with them; [`timeline`] records
//! what ran where, for traces.

pub mod curve;
pub mod error;
pub mod field;
pub mod gpu;
pub mod groth16;
pub mod msm;
pub mod ntt;
pub mod timeline;

pub use error::{Error, Result};
