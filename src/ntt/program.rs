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
    /// A pass of butterfly stages.
    Butterflies(Stages, Decimation),
    Scale,
    DistributePowers,
    /// a·b on the coset, the H step's middle.
    HProduct,
    /// The H step's last pass: the coset shift, 1/n, c's coefficients and 1/Z at once.
    HFinish,
}

/// How many butterfly stages a pass runs, and where their pairs are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stages {
    /// One stage over the whole part.
    One,
    /// Several stages in workgroup memory: its `count` is blocks, one workgroup each.
    Local,
    /// Two stages in registers, four elements an invocation.
    Radix4,
    /// Three stages in registers, eight elements an invocation.
    Radix8,
    /// One stage whose pairs lie in two parts.
    AcrossParts,
}

/// The butterfly of a transform: decimation in time (natural order out of bit-reversed
/// input) or in frequency (bit-reversed order out of natural input).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Decimation {
    Time,
    Frequency,
}

/// Invocations per workgroup of every entry point but `Stages::Local`'s.
const WORKGROUP: u32 = 64;
/// `Stages::Local`: pairs per block (its tile holds 2^8 elements).
pub const LOCAL_WORKGROUP: u32 = 128;

impl EntryPoint for NttEntry {
    const ALL: &'static [Self] = &[
        NttEntry::BitReverse,
        NttEntry::Butterflies(Stages::One, Decimation::Time),
        NttEntry::Butterflies(Stages::One, Decimation::Frequency),
        NttEntry::Butterflies(Stages::Local, Decimation::Time),
        NttEntry::Butterflies(Stages::Local, Decimation::Frequency),
        NttEntry::Butterflies(Stages::Radix4, Decimation::Time),
        NttEntry::Butterflies(Stages::Radix4, Decimation::Frequency),
        NttEntry::Butterflies(Stages::Radix8, Decimation::Time),
        NttEntry::Butterflies(Stages::Radix8, Decimation::Frequency),
        NttEntry::Butterflies(Stages::AcrossParts, Decimation::Time),
        NttEntry::Butterflies(Stages::AcrossParts, Decimation::Frequency),
        NttEntry::Scale,
        NttEntry::DistributePowers,
        NttEntry::HProduct,
        NttEntry::HFinish,
    ];

    fn name(self) -> &'static str {
        use Decimation::{Frequency, Time};
        match self {
            NttEntry::BitReverse => "ntt_bit_reverse",
            NttEntry::Butterflies(Stages::One, Time) => "ntt_butterflies",
            NttEntry::Butterflies(Stages::One, Frequency) => "ntt_butterflies_dif",
            NttEntry::Butterflies(Stages::Local, Time) => "ntt_butterflies_local",
            NttEntry::Butterflies(Stages::Local, Frequency) => "ntt_butterflies_local_dif",
            NttEntry::Butterflies(Stages::Radix4, Time) => "ntt_butterflies_radix4",
            NttEntry::Butterflies(Stages::Radix4, Frequency) => "ntt_butterflies_radix4_dif",
            NttEntry::Butterflies(Stages::Radix8, Time) => "ntt_butterflies_radix8",
            NttEntry::Butterflies(Stages::Radix8, Frequency) => "ntt_butterflies_radix8_dif",
            NttEntry::Butterflies(Stages::AcrossParts, Time) => "ntt_butterflies_across_parts",
            NttEntry::Butterflies(Stages::AcrossParts, Frequency) => {
                "ntt_butterflies_across_parts_dif"
            }
            NttEntry::Scale => "ntt_scale",
            NttEntry::DistributePowers => "ntt_distribute_powers",
            NttEntry::HProduct => "ntt_h_product",
            NttEntry::HFinish => "ntt_h_finish",
        }
    }

    fn workgroup_size(self) -> u32 {
        match self {
            NttEntry::Butterflies(Stages::Local, _) => LOCAL_WORKGROUP,
            _ => WORKGROUP,
        }
    }
}

impl NttEntry {
    /// Invocations of a dispatch whose parameter block says `count`.
    pub fn threads(self, count: u32) -> u64 {
        match self {
            NttEntry::Butterflies(Stages::Local, _) => count as u64 * LOCAL_WORKGROUP as u64,
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
    /// `DistributePowers`: the data is in bit-reversed order.
    pub bit_reversed: u32,
    /// `DistributePowers`: multiply by `tables[factor]` too.
    pub scaled: u32,
    pub _pad: u32,
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
            bit_reversed,
            scaled,
            _pad,
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
