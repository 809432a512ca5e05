//! `shaders/ntt.wgsl` as the NTT runs it: entry points, bindings, parameter block.

use crate::field::wgsl;
use crate::gpu::program::{concat, UniformLayout, DISPATCH_WGSL};
use crate::gpu::{Binding, EntryPoint, Program, WideMul};
use crate::uniform_layout;

pub struct NttProgram;

/// The entry points of [`NttProgram`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NttEntry {
    BitReverse,
    /// One butterfly stage over the whole part.
    Butterflies,
    /// Several stages in workgroup memory: its `count` is blocks, one workgroup each.
    ButterfliesLocal,
    /// Two stages in registers, four elements an invocation.
    ButterfliesRadix4,
    /// Three stages in registers, eight elements an invocation.
    ButterfliesRadix8,
    /// One stage whose pairs lie in two parts.
    ButterfliesAcrossParts,
    Scale,
    DistributePowers,
    /// (a·b - c) / Z on the coset, the H step's middle.
    HCombine,
}

/// Invocations per workgroup of every entry point but `ButterfliesLocal`.
const WORKGROUP: u32 = 64;
/// `ButterfliesLocal`: pairs per block (its tile holds 2^8 elements).
pub const LOCAL_WORKGROUP: u32 = 128;

impl EntryPoint for NttEntry {
    const ALL: &'static [Self] = &[
        NttEntry::BitReverse,
        NttEntry::Butterflies,
        NttEntry::ButterfliesLocal,
        NttEntry::ButterfliesRadix4,
        NttEntry::ButterfliesRadix8,
        NttEntry::ButterfliesAcrossParts,
        NttEntry::Scale,
        NttEntry::DistributePowers,
        NttEntry::HCombine,
    ];

    fn name(self) -> &'static str {
        match self {
            NttEntry::BitReverse => "ntt_bit_reverse",
            NttEntry::Butterflies => "ntt_butterflies",
            NttEntry::ButterfliesLocal => "ntt_butterflies_local",
            NttEntry::ButterfliesRadix4 => "ntt_butterflies_radix4",
            NttEntry::ButterfliesRadix8 => "ntt_butterflies_radix8",
            NttEntry::ButterfliesAcrossParts => "ntt_butterflies_across_parts",
            NttEntry::Scale => "ntt_scale",
            NttEntry::DistributePowers => "ntt_distribute_powers",
            NttEntry::HCombine => "ntt_h_combine",
        }
    }

    fn workgroup_size(self) -> u32 {
        match self {
            NttEntry::ButterfliesLocal => LOCAL_WORKGROUP,
            _ => WORKGROUP,
        }
    }
}

impl NttEntry {
    /// Invocations of a dispatch whose parameter block says `count`.
    pub fn threads(self, count: u32) -> u64 {
        match self {
            NttEntry::ButterfliesLocal => count as u64 * LOCAL_WORKGROUP as u64,
            _ => count as u64,
        }
    }
}

/// Mirrors `NttParams` in ntt.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct NttParams {
    pub n: u32,
    pub log_n: u32,
    pub half: u32,
    pub table: u32,
    pub split: u32,
    pub factor: u32,
    pub count: u32,
    pub first: u32,
    pub part_bits: u32,
    pub part: u32,
    pub partner_part: u32,
    pub stage: u32,
    pub stages: u32,
    pub _pad0: u32,
    pub _pad1: u32,
    pub _pad2: u32,
}

impl Program for NttProgram {
    type Entry = NttEntry;
    const BINDINGS: &'static [Binding] = &[
        Binding::DynamicUniform,
        Binding::ReadWrite,
        Binding::ReadOnly,
        Binding::ReadOnly,
        Binding::ReadOnly,
        Binding::ReadWrite,
    ];
    const UNIFORMS: &'static [(u32, UniformLayout)] = &[(
        0,
        uniform_layout!(NttParams {
            n,
            log_n,
            half,
            table,
            split,
            factor,
            count,
            first,
            part_bits,
            part,
            partner_part,
            stage,
            stages,
            _pad0,
            _pad1,
            _pad2,
        }),
    )];

    fn name() -> &'static str {
        "Ntt"
    }

    fn source(wide: WideMul) -> String {
        let mut parts = vec![DISPATCH_WGSL];
        parts.extend(wgsl::with_fr(wide));
        parts.push(include_str!("../../shaders/ntt.wgsl"));
        concat(&parts)
    }
}
