//! Shader assembly: every WGSL program is a list of source files from `shaders/`, with the
//! wide-multiply implementation chosen per device. The same assembly feeds the pipelines, the
//! naga validation test and `cargo xtask validate-shaders`.

use std::fmt;

/// The two implementations of the 32x32 -> 64 bit multiply-accumulate all field code uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WideMul {
    /// 16-bit halves and u32 arithmetic only: runs on every backend, GL included.
    Portable,
    /// Native u64 products (`SHADER_INT64`: Vulkan, Metal, DX12).
    Int64,
}

impl WideMul {
    pub const ALL: [WideMul; 2] = [WideMul::Portable, WideMul::Int64];

    pub fn needs_int64(self) -> bool {
        self == WideMul::Int64
    }

    fn source(self) -> &'static str {
        match self {
            WideMul::Portable => include_str!("../../shaders/wide_mul_portable.wgsl"),
            WideMul::Int64 => include_str!("../../shaders/wide_mul_int64.wgsl"),
        }
    }

    /// Fq with its multiplication as this path writes it: unrolled on the int64 path (the
    /// fastest code measured on the H200), rolled on the portable path, which serves GL and
    /// software adapters, where compiling the unrolled form took most of a cold run
    /// (BENCHMARKS.md, "Cold start on llvmpipe GL").
    fn fq(self) -> [&'static str; 2] {
        match self {
            WideMul::Portable => [FQ, include_str!("../../shaders/gen/fq_mul_rolled.wgsl")],
            WideMul::Int64 => [FQ, include_str!("../../shaders/gen/fq_mul_unrolled.wgsl")],
        }
    }

    /// Fr as [`fq`](Self::fq) writes Fq.
    fn fr(self) -> [&'static str; 2] {
        match self {
            WideMul::Portable => [FR, include_str!("../../shaders/gen/fr_mul_rolled.wgsl")],
            WideMul::Int64 => [FR, include_str!("../../shaders/gen/fr_mul_unrolled.wgsl")],
        }
    }
}

impl fmt::Display for WideMul {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WideMul::Portable => "portable",
            WideMul::Int64 => "int64",
        })
    }
}

const LIMBS: &str = include_str!("../../shaders/limbs.wgsl");
const FQ: &str = include_str!("../../shaders/gen/fq.wgsl");
const FR: &str = include_str!("../../shaders/gen/fr.wgsl");
const FQ2: &str = include_str!("../../shaders/fq2.wgsl");
const G1_FIELD: &str = include_str!("../../shaders/g1_field.wgsl");
const G2_FIELD: &str = include_str!("../../shaders/g2_field.wgsl");
const CURVE: &str = include_str!("../../shaders/curve.wgsl");
const DISPATCH: &str = include_str!("../../shaders/dispatch.wgsl");

/// One binding of a program's interface (group 0, numbered in order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    Uniform,
    /// A uniform bound with a dynamic offset: one buffer holds the parameters of many
    /// dispatches.
    DynamicUniform,
    ReadOnly,
    ReadWrite,
}

impl Binding {
    pub fn layout_type(self) -> wgpu::BindingType {
        let buffer = |ty, has_dynamic_offset| wgpu::BindingType::Buffer {
            ty,
            has_dynamic_offset,
            min_binding_size: None,
        };
        match self {
            Binding::Uniform => buffer(wgpu::BufferBindingType::Uniform, false),
            Binding::DynamicUniform => buffer(wgpu::BufferBindingType::Uniform, true),
            Binding::ReadOnly => {
                buffer(wgpu::BufferBindingType::Storage { read_only: true }, false)
            }
            Binding::ReadWrite => {
                buffer(wgpu::BufferBindingType::Storage { read_only: false }, false)
            }
        }
    }
}

/// A compute program: its own entry-point file plus the libraries it stands on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Program {
    /// Element-wise field operations for tests and the self-test.
    FieldOps,
    /// Throughput kernels for `bench field`.
    FieldBench,
    /// The raw u64 multiply rate (int64 devices only).
    Int64Bench,
    /// Exclusive prefix sums of u32 (bucket offsets).
    Scan,
    /// Pippenger MSM kernels over G1.
    MsmG1,
    /// Pippenger MSM kernels over G2.
    MsmG2,
    /// Radix-2 NTT over Fr.
    Ntt,
}

use Binding::{DynamicUniform, ReadOnly, ReadWrite, Uniform};

impl Program {
    pub const ALL: [Program; 7] = [
        Program::FieldOps,
        Program::FieldBench,
        Program::Int64Bench,
        Program::Scan,
        Program::MsmG1,
        Program::MsmG2,
        Program::Ntt,
    ];

    /// The program's binding interface, shared by all its entry points (group 0, bindings
    /// numbered in this order); it must match the `@binding`s of its WGSL.
    pub fn bindings(self) -> &'static [Binding] {
        match self {
            Program::FieldOps => &[ReadOnly, ReadOnly, ReadWrite, Uniform],
            Program::FieldBench | Program::Int64Bench => &[ReadOnly, ReadWrite, Uniform],
            Program::Scan => &[DynamicUniform, ReadWrite, ReadWrite],
            Program::Ntt => &[
                DynamicUniform,
                ReadWrite,
                ReadOnly,
                ReadOnly,
                ReadOnly,
                ReadWrite,
            ],
            Program::MsmG1 | Program::MsmG2 => &[
                DynamicUniform,
                ReadOnly,
                ReadOnly,
                ReadWrite,
                ReadWrite,
                ReadWrite,
                ReadWrite,
                ReadWrite,
                ReadWrite,
                ReadWrite,
                ReadWrite,
                ReadWrite,
                ReadWrite,
                ReadWrite,
            ],
        }
    }

    fn main_source(self) -> &'static str {
        match self {
            Program::FieldOps => include_str!("../../shaders/field_ops.wgsl"),
            Program::FieldBench => include_str!("../../shaders/field_bench.wgsl"),
            Program::Int64Bench => include_str!("../../shaders/int64_bench.wgsl"),
            Program::Scan => include_str!("../../shaders/scan.wgsl"),
            Program::MsmG1 | Program::MsmG2 => include_str!("../../shaders/msm.wgsl"),
            Program::Ntt => include_str!("../../shaders/ntt.wgsl"),
        }
    }

    /// Whether this program exists for `wide` at all: int64-only programs have no portable
    /// build, and programs without field code are built once, as their portable variant.
    pub fn has_variant(self, wide: WideMul) -> bool {
        match self {
            Program::Int64Bench => wide == WideMul::Int64,
            Program::Scan => wide == WideMul::Portable,
            _ => true,
        }
    }

    /// The full WGSL text for one variant.
    pub fn source(self, wide: WideMul) -> String {
        let [fq, fq_mul] = wide.fq();
        let [fr, fr_mul] = wide.fr();
        let libraries: &[&str] = match self {
            Program::FieldOps | Program::FieldBench => {
                &[LIMBS, wide.source(), fq, fq_mul, fr, fr_mul, FQ2]
            }
            Program::Int64Bench | Program::Scan => &[],
            Program::MsmG1 => &[
                DISPATCH,
                LIMBS,
                wide.source(),
                fq,
                fq_mul,
                fr,
                fr_mul,
                G1_FIELD,
                CURVE,
            ],
            Program::MsmG2 => &[
                DISPATCH,
                LIMBS,
                wide.source(),
                fq,
                fq_mul,
                fr,
                fr_mul,
                FQ2,
                G2_FIELD,
                CURVE,
            ],
            Program::Ntt => &[DISPATCH, LIMBS, wide.source(), fr, fr_mul],
        };
        let mut text = String::new();
        for part in libraries.iter().chain([&self.main_source()]) {
            text.push_str(part);
            text.push('\n');
        }
        text
    }

    /// Every (program, variant) pair that exists.
    pub fn all_variants() -> impl Iterator<Item = (Program, WideMul)> {
        Program::ALL.into_iter().flat_map(|p| {
            WideMul::ALL
                .into_iter()
                .filter(move |&w| p.has_variant(w))
                .map(move |w| (p, w))
        })
    }
}

impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Parses and validates one variant with naga, with exactly the capabilities that variant
/// may assume (the portable path must validate without `SHADER_INT64`).
pub fn validate(program: Program, wide: WideMul) -> Result<naga::Module, String> {
    let source = program.source(wide);
    let module = naga::front::wgsl::parse_str(&source)
        .map_err(|e| e.emit_to_string_with_path(&source, &format!("{program}/{wide}")))?;
    let mut caps = naga::valid::Capabilities::default();
    if wide.needs_int64() {
        caps |= naga::valid::Capabilities::SHADER_INT64;
    }
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
        .validate(&module)
        .map_err(|e| e.emit_to_string_with_path(&source, &format!("{program}/{wide}")))?;
    Ok(module)
}
