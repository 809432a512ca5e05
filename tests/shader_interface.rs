//! Every shader program, in every wide-multiply variant, parses and validates with naga with
//! only the capabilities that variant may assume, translates to the shading languages of the
//! other backends (SPIR-V for Vulkan, MSL 2.4 for Metal, HLSL shader model 6.0 for DX12), and
//! its WGSL interface is the one its Rust side declares: the same bindings in the same order and access, uniform blocks laid out
//! field for field as the Rust structs, and the entry points of the Rust enum with the
//! workgroup sizes its dispatches assume. Needs no GPU: a mismatch is caught here rather than
//! as wrong numbers on some adapter.

use naga::{AddressSpace, StorageAccess, TypeInner};
use wgpu_groth16::gpu::program::ProgramInfo;
use wgpu_groth16::gpu::Binding;

/// Every (program, variant) with its naga module.
fn modules() -> Vec<(ProgramInfo, String, naga::Module)> {
    let mut out = Vec::new();
    for program in wgpu_groth16::programs() {
        for wide in program.variants() {
            let label = format!("{}/{wide}", program.name);
            let (module, _) = program
                .validate(wide)
                .unwrap_or_else(|message| panic!("{label} does not validate:\n{message}"));
            out.push((program.clone(), label, module));
        }
    }
    out
}

#[test]
fn every_shader_variant_validates_with_naga() {
    let mut failures = Vec::new();
    let mut count = 0;
    for program in wgpu_groth16::programs() {
        for wide in program.variants() {
            count += 1;
            if let Err(message) = program.validate(wide) {
                failures.push(message);
            }
        }
    }
    assert!(
        count >= 5,
        "expected every program in both variants, got {count}"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A backend's translation failures are caught here, without its driver: naga is the
/// translator wgpu uses on Metal and DX12 too.
#[test]
fn every_shader_variant_translates_to_spirv_msl_and_hlsl() {
    let mut failures = Vec::new();
    let mut count = 0;
    for program in wgpu_groth16::programs() {
        for wide in program.variants() {
            count += 1;
            let label = format!("{}/{wide}", program.name);
            let (module, info) = program
                .validate(wide)
                .unwrap_or_else(|message| panic!("{label} does not validate:\n{message}"));
            let spirv = naga::back::spv::write_vec(
                &module,
                &info,
                &naga::back::spv::Options::default(),
                None,
            );
            if let Err(e) = spirv {
                failures.push(format!("{label}: SPIR-V: {e}"));
            }
            let msl_options = naga::back::msl::Options {
                lang_version: (2, 4),
                ..Default::default()
            };
            let msl = naga::back::msl::write_string(
                &module,
                &info,
                &msl_options,
                &naga::back::msl::PipelineOptions::default(),
            );
            match msl {
                Err(e) => failures.push(format!("{label}: MSL: {e}")),
                // A failed entry point is reported beside the text, not as an error.
                Ok((_, translated)) => {
                    for entry in translated.entry_point_names {
                        if let Err(e) = entry {
                            failures.push(format!("{label}: MSL entry point: {e}"));
                        }
                    }
                }
            }
            let hlsl_options = naga::back::hlsl::Options {
                shader_model: naga::back::hlsl::ShaderModel::V6_0,
                ..Default::default()
            };
            let pipeline = naga::back::hlsl::PipelineOptions::default();
            let mut hlsl = String::new();
            let written = naga::back::hlsl::Writer::new(&mut hlsl, &hlsl_options, &pipeline)
                .write(&module, &info, None);
            match written {
                Err(e) => failures.push(format!("{label}: HLSL: {e}")),
                Ok(reflection) => {
                    for entry in reflection.entry_point_names {
                        if let Err(e) = entry {
                            failures.push(format!("{label}: HLSL entry point: {e}"));
                        }
                    }
                }
            }
        }
    }
    assert!(
        count >= 5,
        "expected every program in both variants, got {count}"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_program_has_the_entry_points_and_workgroup_sizes_its_rust_side_names() {
    for (program, label, module) in modules() {
        let mut in_wgsl: Vec<(String, u32)> = module
            .entry_points
            .iter()
            .map(|e| {
                let [x, y, z] = e.workgroup_size;
                (e.name.clone(), x * y * z)
            })
            .collect();
        let mut in_rust: Vec<(String, u32)> = program
            .entry_points
            .iter()
            .map(|&(name, size)| (name.to_string(), size))
            .collect();
        in_wgsl.sort();
        in_rust.sort();
        assert_eq!(
            in_wgsl, in_rust,
            "{label}: entry points (name, workgroup size)"
        );
    }
}

#[test]
fn every_program_binds_what_its_rust_side_declares() {
    for (program, label, module) in modules() {
        let mut bound: Vec<(u32, Binding, String)> = Vec::new();
        for (_, var) in module.global_variables.iter() {
            let Some(binding) = &var.binding else {
                continue;
            };
            assert_eq!(binding.group, 0, "{label}: {:?} outside group 0", var.name);
            let kind = match var.space {
                AddressSpace::Uniform => Binding::Uniform,
                AddressSpace::Storage { access } if access.contains(StorageAccess::STORE) => {
                    Binding::ReadWrite
                }
                AddressSpace::Storage { .. } => Binding::ReadOnly,
                other => panic!("{label}: binding {} in {other:?}", binding.binding),
            };
            bound.push((binding.binding, kind, var.name.clone().unwrap_or_default()));
        }
        bound.sort_by_key(|b| b.0);
        let numbers: Vec<u32> = bound.iter().map(|b| b.0).collect();
        let expected: Vec<u32> = (0..program.bindings.len() as u32).collect();
        assert_eq!(numbers, expected, "{label}: binding numbers {bound:?}");
        for ((number, kind, name), declared) in bound.iter().zip(program.bindings) {
            // A dynamic offset is the host's business; the shader sees a uniform.
            let declared = match declared {
                Binding::DynamicUniform => Binding::Uniform,
                other => *other,
            };
            assert_eq!(
                *kind, declared,
                "{label}: binding {number} ({name}) is {kind:?} in WGSL, {declared:?} in Rust"
            );
        }
    }
}

#[test]
fn every_uniform_block_is_laid_out_as_its_rust_struct() {
    for (program, label, module) in modules() {
        let uniforms: Vec<(u32, naga::Handle<naga::Type>)> = module
            .global_variables
            .iter()
            .filter(|(_, v)| v.space == AddressSpace::Uniform)
            .filter_map(|(_, v)| Some((v.binding.as_ref()?.binding, v.ty)))
            .collect();
        let declared: Vec<u32> = program.uniforms.iter().map(|u| u.0).collect();
        let mut found: Vec<u32> = uniforms.iter().map(|u| u.0).collect();
        found.sort();
        assert_eq!(found, declared, "{label}: uniform bindings");
        for (binding, layout) in program.uniforms {
            let ty = uniforms
                .iter()
                .find(|u| u.0 == *binding)
                .map(|u| &module.types[u.1])
                .expect("checked above");
            assert_eq!(
                ty.name.as_deref(),
                Some(layout.wgsl_struct),
                "{label}: uniform {binding}'s struct"
            );
            let TypeInner::Struct { members, span } = &ty.inner else {
                panic!("{label}: uniform {binding} is not a struct");
            };
            let in_wgsl: Vec<(String, usize)> = members
                .iter()
                .map(|m| (m.name.clone().unwrap_or_default(), m.offset as usize))
                .collect();
            let in_rust: Vec<(String, usize)> = layout
                .fields
                .iter()
                .map(|&(name, offset)| (name.to_string(), offset))
                .collect();
            let (wgsl_fields, rust_fields) = (without_padding(&in_wgsl), without_padding(&in_rust));
            assert_eq!(
                wgsl_fields, rust_fields,
                "{label}: {} fields (name, offset)",
                layout.wgsl_struct
            );
            assert!(
                *span as usize <= layout.size,
                "{label}: {} is {span} bytes in WGSL, {} in Rust",
                layout.wgsl_struct,
                layout.size
            );
        }
    }
}

/// Fields other than the padding (`_`-named) ones, which may differ in shape.
fn without_padding(fields: &[(String, usize)]) -> Vec<(String, usize)> {
    fields
        .iter()
        .filter(|(name, _)| !name.starts_with('_'))
        .cloned()
        .collect()
}
