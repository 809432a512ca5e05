//! `shaders/subgroup.wgsl` over G1 or G2.

use std::marker::PhantomData;

use super::SubgroupCurve;
use crate::curve::CURVE_WGSL;
use crate::field::wgsl;
use crate::gpu::program::{concat, UniformLayout, DISPATCH_WGSL};
use crate::gpu::{Binding, EntryPoint, Program, WideMul};
use crate::uniform_layout;

/// The subgroup check over curve `C`.
pub struct SubgroupProgram<C>(PhantomData<C>);

/// Its entry points: on the curve, then in the subgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SubgroupEntry {
    CurveCheck,
    SubgroupCheck,
}

impl EntryPoint for SubgroupEntry {
    const ALL: &'static [Self] = &[SubgroupEntry::CurveCheck, SubgroupEntry::SubgroupCheck];

    fn name(self) -> &'static str {
        match self {
            SubgroupEntry::CurveCheck => "curve_check",
            SubgroupEntry::SubgroupCheck => "subgroup_check",
        }
    }

    fn workgroup_size(self) -> u32 {
        64
    }
}

/// Mirrors `SubgroupParams` in subgroup.wgsl.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SubgroupParams {
    pub count: u32,
    /// This pass runs k's bits `high` - 1 down to `low`.
    pub high: u32,
    pub low: u32,
    pub k_bits: u32,
    pub k0: u32,
    pub k1: u32,
    pub k2: u32,
    pub k3: u32,
    /// The index, among all the points checked, of this dispatch's first point.
    pub first: u32,
    /// 1 where a point with x = 0 is off the curve for blst (G1).
    pub x_zero_refused: u32,
}

impl<C: SubgroupCurve> Program for SubgroupProgram<C> {
    type Entry = SubgroupEntry;
    const BINDINGS: &'static [Binding] = &[
        Binding::Uniform,   // params
        Binding::ReadOnly,  // points
        Binding::ReadWrite, // sums
        Binding::ReadOnly,  // constants
        Binding::ReadWrite, // first_bad
    ];
    const UNIFORMS: &'static [(u32, UniformLayout)] = &[(
        0,
        uniform_layout!(SubgroupParams {
            count,
            high,
            low,
            k_bits,
            k0,
            k1,
            k2,
            k3,
            first,
            x_zero_refused,
        }),
    )];

    fn name() -> &'static str {
        C::PROGRAM_NAME
    }

    fn source(wide: WideMul) -> String {
        let mut parts = vec![DISPATCH_WGSL];
        parts.extend(wgsl::with_fq_and_fr(wide));
        parts.extend(C::field_wgsl(wide));
        parts.extend([CURVE_WGSL, include_str!("../../shaders/subgroup.wgsl")]);
        concat(&parts)
    }
}
