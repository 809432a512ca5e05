//! Project chores: `cargo xtask <command>`.
//!
//! - `ci`: everything CI checks (format, generated code, clippy, documentation, shader
//!   validation, tests, examples and benchmarks built)
//! - `gen [--check]`: regenerate the WGSL in `shaders/gen/` (or fail if it is stale)
//! - `validate-shaders`: parse and validate every shader variant with naga (no GPU needed)
//! - `bench [ARGS..]`: build in release and run `wgpu-groth16 bench ARGS..`

mod gen_field;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("gen") => generate(args.iter().any(|a| a == "--check")),
        Some("validate-shaders") => validate_shaders(),
        Some("bench") => cargo(
            &[
                &["run", "--release", "--", "bench"],
                &str_refs(&args[1..])[..],
            ]
            .concat(),
        ),
        _ => Err(
            "usage: cargo xtask <ci | gen [--check] | validate-shaders | bench ARGS..>".to_string(),
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

fn str_refs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs cargo with `args` in the workspace root and says how long it took: CI's time limit
/// is what these steps add up to.
fn cargo(args: &[&str]) -> Result<(), String> {
    cargo_with(args, &[])
}

/// [`cargo`] with environment variables set.
fn cargo_with(args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
    let command = format!("cargo {}", args.join(" "));
    eprintln!("xtask: {command}");
    let started = Instant::now();
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root())
        .status()
        .map_err(|e| format!("could not run cargo: {e}"))?;
    eprintln!(
        "xtask: `{command}` took {:.0} s",
        started.elapsed().as_secs_f64()
    );
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{command}` failed ({status})"))
    }
}

fn generate(check: bool) -> Result<(), String> {
    let mut stale = Vec::new();
    for (path, text) in gen_field::outputs() {
        let full = root().join(path);
        let current = std::fs::read_to_string(&full).unwrap_or_default();
        if current == text {
            continue;
        }
        if check {
            stale.push(path);
        } else {
            std::fs::create_dir_all(full.parent().expect("generated files live in a folder"))
                .map_err(|e| format!("{path}: {e}"))?;
            std::fs::write(&full, text).map_err(|e| format!("{path}: {e}"))?;
            eprintln!("xtask: wrote {path}");
        }
    }
    if stale.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "stale generated shaders (run `cargo xtask gen`): {}",
            stale.join(", ")
        ))
    }
}

fn validate_shaders() -> Result<(), String> {
    cargo(&["test", "--test", "shader_interface"])
}

fn ci() -> Result<(), String> {
    let started = Instant::now();
    let result = ci_steps();
    eprintln!(
        "xtask: ci took {:.0} s in all",
        started.elapsed().as_secs_f64()
    );
    result
}

fn ci_steps() -> Result<(), String> {
    cargo(&["fmt", "--all", "--", "--check"])?;
    generate(true)?;
    cargo(&[
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ])?;
    // Every doc link resolves and no doc comment is malformed.
    cargo_with(
        &["doc", "--no-deps", "--workspace"],
        &[("RUSTDOCFLAGS", "-D warnings")],
    )?;
    validate_shaders()?;
    // Builds the examples too: they must keep compiling.
    cargo(&["test", "--workspace", "--no-fail-fast"])?;
    // Benchmarks must keep compiling even though CI does not run them. Built in the test
    // profile, on the dependencies the tests just built: `cargo bench --no-run` would build
    // every dependency again in release, a third full build on CI's two cores.
    cargo(&["test", "--benches", "--no-run"])
}
