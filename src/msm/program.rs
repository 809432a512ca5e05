//! `shaders/msm.wgsl` (over G1 or G2) and `shaders/scan.wgsl` as the MSM runs them.

use std::marker::PhantomData;

use crate::curve::{GpuCurve, CURVE_WGSL};
use crate::field::wgsl;
use crate::gpu::program::{concat, UniformLayout, DISPATCH_WGSL};
use crate::gpu::{Binding, EntryPoint, Program, WideMul};
use crate::uniform_layout;

/// The Pippenger kernels over curve `C`.
pub struct MsmProgram<C>(PhantomData<C>);

/// The entry points of [`MsmProgram`], in the order a chunk runs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MsmEntry {
    ClearCounts,
    StartCursors,
    Count,
    Scatter,
    AccumulateBases,
    AccumulatePartials,
    ReduceGroups,
    SumPairs,
}

/// Invocations per workgroup of every MSM kernel (`thread_index` in dispatch.wgsl).
pub const MSM_WORKGROUP: u32 = 64;

impl EntryPoint for MsmEntry {
    const ALL: &'static [Self] = &[
        MsmEntry::ClearCounts,
        MsmEntry::StartCursors,
        MsmEntry::Count,
        MsmEntry::Scatter,
        MsmEntry::AccumulateBases,
        MsmEntry::AccumulatePartials,
        MsmEntry::ReduceGroups,
        MsmEntry::SumPairs,
    ];

    fn name(self) -> &'static str {
        match self {
            MsmEntry::ClearCounts => "msm_clear_counts",
            MsmEntry::StartCursors => "msm_start_cursors",
            MsmEntry::Count => "msm_count",
            MsmEntry::Scatter => "msm_scatter",
            MsmEntry::AccumulateBases => "msm_accumulate_bases",
            MsmEntry::AccumulatePartials => "msm_accumulate_partials",
            MsmEntry::ReduceGroups => "msm_reduce_groups",
            MsmEntry::SumPairs => "msm_sum_pairs",
        }
    }

    fn workgroup_size(self) -> u32 {
        MSM_WORKGROUP
    }
}

/// Mirrors `MsmParams` in msm.wgsl.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MsmParams {
    pub count: u32,
    /// The width of every window but the first `wide_windows`, which are a bit wider.
    pub window_bits: u32,
    pub windows: u32,
    pub wide_windows: u32,
    pub segment: u32,
    pub level: u32,
    pub groups: u32,
    /// 1 for chunks after the first: level 0 adds into the buckets the earlier chunks left.
    pub fold: u32,
}

impl<C: GpuCurve> Program for MsmProgram<C> {
    type Entry = MsmEntry;
    const BINDINGS: &'static [Binding] = &[
        Binding::DynamicUniform, // params
        Binding::ReadWrite,      // scalars (msm_count takes them out of Montgomery form)
        Binding::ReadOnly,       // bases
        Binding::ReadWrite,      // counts
        Binding::ReadWrite,      // cursor
        Binding::ReadWrite,      // sorted
        Binding::ReadWrite,      // keys_in
        Binding::ReadWrite,      // points_in
        Binding::ReadWrite,      // keys_out
        Binding::ReadWrite,      // points_out
        Binding::ReadWrite,      // buckets
        Binding::ReadWrite,      // lengths
        Binding::ReadWrite,      // sums
        Binding::ReadWrite,      // digit_windows
    ];
    const UNIFORMS: &'static [(u32, UniformLayout)] = &[(
        0,
        uniform_layout!(MsmParams {
            count,
            window_bits,
            windows,
            wide_windows,
            segment,
            level,
            groups,
            fold,
        }),
    )];

    fn name() -> &'static str {
        C::MSM_NAME
    }

    fn source(wide: WideMul) -> String {
        let mut parts = vec![DISPATCH_WGSL];
        parts.extend(wgsl::with_fq_and_fr(wide));
        parts.extend(C::field_wgsl(wide));
        parts.extend([CURVE_WGSL, include_str!("../../shaders/msm.wgsl")]);
        concat(&parts)
    }
}

/// Exclusive prefix sums of u32 (bucket offsets): no field code, built once.
pub struct ScanProgram;

/// The entry points of [`ScanProgram`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScanEntry {
    /// Scans each block in workgroup memory and records the block totals.
    Blocks,
    /// Adds each block's offset back.
    AddOffsets,
}

/// Elements a workgroup scans, one per invocation.
pub const SCAN_BLOCK: u32 = 256;

impl EntryPoint for ScanEntry {
    const ALL: &'static [Self] = &[ScanEntry::Blocks, ScanEntry::AddOffsets];

    fn name(self) -> &'static str {
        match self {
            ScanEntry::Blocks => "scan_blocks",
            ScanEntry::AddOffsets => "scan_add_offsets",
        }
    }

    fn workgroup_size(self) -> u32 {
        SCAN_BLOCK
    }
}

/// Mirrors `ScanParams` in scan.wgsl, padded to a 16-byte uniform block.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ScanParams {
    pub len: u32,
    pub _pad: [u32; 3],
}

impl Program for ScanProgram {
    type Entry = ScanEntry;
    const BINDINGS: &'static [Binding] = &[
        Binding::DynamicUniform,
        Binding::ReadWrite,
        Binding::ReadWrite,
    ];
    const UNIFORMS: &'static [(u32, UniformLayout)] =
        &[(0, uniform_layout!(ScanParams { len, _pad }))];

    fn name() -> &'static str {
        "Scan"
    }

    fn source(_: WideMul) -> String {
        include_str!("../../shaders/scan.wgsl").to_string()
    }

    fn has_variant(wide: WideMul) -> bool {
        wide == WideMul::Portable
    }
}
