//! `shaders/sparse.wgsl` as the products and the gathers run it: entry points, bindings,
//! parameter block.

use crate::field::wgsl;
use crate::gpu::program::{concat, UniformLayout, DISPATCH_WGSL};
use crate::gpu::{Binding, EntryPoint, Program, WideMul};
use crate::uniform_layout;

pub struct SparseProgram;

/// The entry points of [`SparseProgram`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SparseEntry {
    /// One chunk of a matrix's rows.
    Rows,
    /// One chunk of a query's selected variables.
    Gather,
}

impl EntryPoint for SparseEntry {
    const ALL: &'static [Self] = &[SparseEntry::Rows, SparseEntry::Gather];

    fn name(self) -> &'static str {
        match self {
            SparseEntry::Rows => "sparse_rows",
            SparseEntry::Gather => "sparse_gather",
        }
    }

    fn workgroup_size(self) -> u32 {
        64
    }
}

/// Aux parts the kernel binds.
pub const AUX_PARTS: usize = 4;

/// Mirrors `SparseParams` in sparse.wgsl, padded to a 16-byte uniform block.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SparseParams {
    pub count: u32,
    pub out_first: u32,
    pub inputs_at: u32,
    pub aux_part_log: u32,
    pub coefficients_at: u32,
    pub _pad: [u32; 3],
}

impl Program for SparseProgram {
    type Entry = SparseEntry;
    const BINDINGS: &'static [Binding] = &[
        Binding::Uniform,
        Binding::ReadOnly,
        Binding::ReadOnly,
        Binding::ReadOnly,
        Binding::ReadOnly,
        Binding::ReadOnly,
        Binding::ReadOnly,
        Binding::ReadOnly,
        Binding::ReadWrite,
    ];
    const UNIFORMS: &'static [(u32, UniformLayout)] = &[(
        0,
        uniform_layout!(SparseParams {
            count,
            out_first,
            inputs_at,
            aux_part_log,
            coefficients_at,
            _pad,
        }),
    )];

    fn name() -> &'static str {
        "Sparse"
    }

    fn source(wide: WideMul) -> String {
        let mut parts = vec![DISPATCH_WGSL];
        parts.extend(wgsl::with_fr(wide));
        parts.push(include_str!("../../shaders/sparse.wgsl"));
        concat(&parts)
    }
}
