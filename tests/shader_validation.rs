//! Every shader program in every wide-multiply variant parses and validates with naga, with
//! only the capabilities that variant may assume. Needs no GPU.

use wgpu_groth16::gpu::shader::validate;
use wgpu_groth16::gpu::Program;

#[test]
fn every_shader_variant_validates_with_naga() {
    let mut failures = Vec::new();
    let mut count = 0;
    for (program, wide) in Program::all_variants() {
        count += 1;
        if let Err(message) = validate(program, wide) {
            failures.push(message);
        }
    }
    assert!(
        count >= 5,
        "expected every program in both variants, got {count}"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_program_has_an_entry_point_per_kernel() {
    for (program, wide) in Program::all_variants() {
        let module = validate(program, wide).expect("validates");
        assert!(
            !module.entry_points.is_empty(),
            "{program}/{wide} has no entry point"
        );
    }
}
