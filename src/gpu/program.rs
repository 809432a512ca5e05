//! Compute programs. Each kernel module declares its own ([`Program`]: the WGSL of each
//! wide-multiply variant, the binding interface, the uniform blocks as Rust lays them out, the
//! entry points as an enum); this module validates them with naga and `GpuContext::compile`
//! builds their pipelines. It knows none of the programs: `wgpu_groth16::programs()` lists
//! them for the tests, which check every variant's WGSL against its Rust side with no GPU
//! (tests/shader_interface.rs).

use std::fmt;
use std::hash::Hash;

/// The two implementations of the 32x32 -> 64 bit multiply-accumulate and the carry chains
/// all field code uses.
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

    /// The WGSL of `mac`, the multiply-accumulate, and `adc` / `sbb`, the carry and borrow
    /// chains over u32 limbs.
    pub fn source(self) -> &'static str {
        match self {
            WideMul::Portable => include_str!("../../shaders/wide_mul_portable.wgsl"),
            WideMul::Int64 => include_str!("../../shaders/wide_mul_int64.wgsl"),
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

/// `thread_index` for kernels of 64 invocations dispatched over x and y (`workgroup_grid`).
pub const DISPATCH_WGSL: &str = include_str!("../../shaders/dispatch.wgsl");

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

/// A uniform block as Rust lays it out, which the WGSL struct of the same binding must match
/// field for field (names and byte offsets; fields named `_...` are padding).
#[derive(Clone, Copy, Debug)]
pub struct UniformLayout {
    /// The WGSL struct's name.
    pub wgsl_struct: &'static str,
    pub size: usize,
    /// (field name, byte offset), in declaration order.
    pub fields: &'static [(&'static str, usize)],
}

/// The [`UniformLayout`] of a `#[repr(C)]` struct: `uniform_layout!(MsmParams { count, .. })`
/// names the fields the WGSL struct of the same name declares.
#[macro_export]
macro_rules! uniform_layout {
    ($ty:ident { $($field:ident),* $(,)? }) => {
        $crate::gpu::program::UniformLayout {
            wgsl_struct: stringify!($ty),
            size: ::std::mem::size_of::<$ty>(),
            fields: &[$((stringify!($field), ::std::mem::offset_of!($ty, $field))),*],
        }
    };
}

/// The entry points of one program: the WGSL function names and the workgroup size each
/// declares, which dispatches size their grids by.
pub trait EntryPoint: Copy + Eq + Hash + fmt::Debug + Send + Sync + 'static {
    /// Every entry point, in the order pipelines are built.
    const ALL: &'static [Self];
    fn name(self) -> &'static str;
    /// Invocations per workgroup (`@workgroup_size`, x only).
    fn workgroup_size(self) -> u32;
}

/// A compute program, as the kernel module that runs it declares it.
pub trait Program: Send + Sync + 'static {
    type Entry: EntryPoint;
    /// Group-0 bindings, numbered in this order; shared by every entry point.
    const BINDINGS: &'static [Binding];
    /// (binding, layout) of each uniform block.
    const UNIFORMS: &'static [(u32, UniformLayout)];

    /// Name in labels and messages.
    fn name() -> &'static str;

    /// The whole WGSL text of one variant: libraries, then the program's own file.
    fn source(wide: WideMul) -> String;

    /// Whether the program is built for `wide`: int64-only programs have no portable build,
    /// and programs without field code are built once, as their portable variant.
    fn has_variant(wide: WideMul) -> bool {
        let _ = wide;
        true
    }
}

/// WGSL parts joined in order, one newline after each.
pub fn concat(parts: &[&str]) -> String {
    let mut text = String::new();
    for part in parts {
        text.push_str(part);
        text.push('\n');
    }
    text
}

/// A program described without its Rust types: what validation and the interface test read.
#[derive(Clone, Debug)]
pub struct ProgramInfo {
    pub name: &'static str,
    pub bindings: &'static [Binding],
    pub uniforms: &'static [(u32, UniformLayout)],
    /// (name, workgroup size) of every entry point.
    pub entry_points: Vec<(&'static str, u32)>,
    source: fn(WideMul) -> String,
    has_variant: fn(WideMul) -> bool,
}

impl ProgramInfo {
    pub fn of<P: Program>() -> Self {
        ProgramInfo {
            name: P::name(),
            bindings: P::BINDINGS,
            uniforms: P::UNIFORMS,
            entry_points: P::Entry::ALL
                .iter()
                .map(|e| (e.name(), e.workgroup_size()))
                .collect(),
            source: P::source,
            has_variant: P::has_variant,
        }
    }

    /// The variants the program is built in.
    pub fn variants(&self) -> impl Iterator<Item = WideMul> + '_ {
        WideMul::ALL.into_iter().filter(|&w| (self.has_variant)(w))
    }

    pub fn source(&self, wide: WideMul) -> String {
        (self.source)(wide)
    }

    /// Parses and validates one variant with naga, with exactly the capabilities that variant
    /// may assume (the portable path must validate without `SHADER_INT64`): the module and
    /// what validation found out about it, which naga's backends translate from.
    pub fn validate(
        &self,
        wide: WideMul,
    ) -> Result<(naga::Module, naga::valid::ModuleInfo), String> {
        validate_source(&self.source(wide), &format!("{}/{wide}", self.name), wide)
    }
}

/// naga's parse and validation of `source`, errors rendered against it under `label`.
fn validate_source(
    source: &str,
    label: &str,
    wide: WideMul,
) -> Result<(naga::Module, naga::valid::ModuleInfo), String> {
    let module = naga::front::wgsl::parse_str(source)
        .map_err(|e| e.emit_to_string_with_path(source, label))?;
    let mut caps = naga::valid::Capabilities::default();
    if wide.needs_int64() {
        caps |= naga::valid::Capabilities::SHADER_INT64;
    }
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
        .validate(&module)
        .map_err(|e| e.emit_to_string_with_path(source, label))?;
    Ok((module, info))
}
