//! `c2` on the command line: every refusal is one line on stderr, exit status 2, and
//! nothing at the output path; `seal` writes C1 outputs `c2` reads in both forms.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine as _;
use serde_json::json;
use wgpu_groth16_filecoin::params::ParamsFiles;

fn cli(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_wgpu-groth16-filecoin"));
    command.args(args);
    for var in [
        "BELLMAN_NO_GPU",
        "RUST_LOG",
        "RUST_BACKTRACE",
        "XDG_RUNTIME_DIR",
    ] {
        command.env_remove(var);
    }
    command.env("FIL_PROOFS_PARAMETER_CACHE", common::parameter_cache());
    command.env("WGPU_GROTH16_PARAMS_CACHE", common::user_cache());
    command
}

fn run(command: &mut Command) -> Output {
    command.output().expect("the binary runs")
}

/// Exit status 2, one line `error: ...` containing `expected`.
fn assert_one_line_error(output: &Output, expected: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line expected: {stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    assert!(lines[0].contains(expected), "{expected:?} not in: {stderr}");
}

/// A folder for one test, and the C1 output of the shared sector written there (bare).
fn folder(name: &str) -> PathBuf {
    let dir = common::scratch().join("cli").join(name);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn bare_c1() -> Vec<u8> {
    serde_json::to_vec(&common::sealed().phase1).unwrap()
}

fn curio_c1(sector_num: u64, sector_size: u64) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "SectorNum": sector_num,
        "Phase1Out": base64::engine::general_purpose::STANDARD.encode(bare_c1()),
        "SectorSize": sector_size,
    }))
    .unwrap()
}

/// `c2` on `c1` bytes (miner and sector of the shared sector unless `extra` says), with a
/// previous file at `--out` that must survive any failure.
fn c2(dir: &Path, c1: &[u8], extra: &[&str]) -> Output {
    let (c1_path, out) = (dir.join("c1.json"), dir.join("proof"));
    fs::write(&c1_path, c1).unwrap();
    fs::write(&out, b"previous").unwrap();
    let miner = common::MINER_ID.to_string();
    let sector = common::SECTOR_ID.to_string();
    let mut args = vec![
        "c2",
        "--c1",
        c1_path.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    if !extra
        .iter()
        .any(|a| *a == "--miner-id" || *a == "--prover-id")
    {
        args.extend(["--miner-id", &miner]);
    }
    if !extra
        .iter()
        .any(|a| *a == "--sector-id" || *a == "--no-sector-id")
    {
        args.extend(["--sector-id", &sector]);
    }
    args.extend(extra.iter().filter(|a| **a != "--no-sector-id"));
    let output = run(&mut cli(&args));
    assert_eq!(fs::read(&out).unwrap(), b"previous", "--out was touched");
    output
}

#[test]
fn missing_parameters_name_the_file_and_the_sector_size() {
    let dir = folder("missing");
    let output = c2(&dir, &bare_c1(), &[]);
    let expected = ParamsFiles::seal(common::PROOF).unwrap().params;
    assert_one_line_error(
        &output,
        "Groth16 parameters for StackedDrg2KiBV1_1 (2 KiB) not found",
    );
    assert_one_line_error(&output, &expected.display().to_string());
}

#[test]
fn the_json_error_is_one_document() {
    let dir = folder("json");
    let output = c2(&dir, &bare_c1(), &["--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    assert!(
        doc["error"].as_str().unwrap().contains("not found"),
        "{doc}"
    );
}

#[test]
fn a_truncated_c1_file_is_refused() {
    let dir = folder("truncated");
    let c1 = bare_c1();
    let output = c2(&dir, &c1[..c1.len() / 2], &[]);
    assert_one_line_error(&output, "truncated");
}

#[test]
fn a_c1_file_that_is_not_json_is_refused() {
    let dir = folder("not-json");
    let output = c2(&dir, b"PK\x03\x04 a zip file", &[]);
    assert_one_line_error(&output, "not JSON");
}

#[test]
fn json_that_is_not_a_c1_output_is_refused() {
    let dir = folder("other-json");
    let output = c2(&dir, br#"{"registered_proof": "StackedDrg2KiBV1_1"}"#, &[]);
    assert_one_line_error(&output, "not a SealCommitPhase1Output");
}

#[test]
fn curio_wrapper_gives_the_sector_number() {
    let dir = folder("curio");
    // No --sector-id: the wrapper's SectorNum is used, the checks pass, the parameters are
    // what is missing.
    let output = c2(
        &dir,
        &curio_c1(common::SECTOR_ID, 2048),
        &["--no-sector-id"],
    );
    assert_one_line_error(&output, "not found");
    // Another SectorNum: the replica id was not made for it.
    let output = c2(
        &dir,
        &curio_c1(common::SECTOR_ID + 1, 2048),
        &["--no-sector-id"],
    );
    assert_one_line_error(&output, "replica id was not made for sector 8");
    // A --sector-id against the wrapper's.
    let output = c2(
        &dir,
        &curio_c1(common::SECTOR_ID, 2048),
        &["--sector-id", "9"],
    );
    assert_one_line_error(&output, "9 given, the wrapper's SectorNum is 7");
}

#[test]
fn a_curio_wrapper_of_another_sector_size_is_refused() {
    let dir = folder("curio-size");
    let output = c2(
        &dir,
        &curio_c1(common::SECTOR_ID, 32 << 30),
        &["--no-sector-id"],
    );
    assert_one_line_error(
        &output,
        "SectorSize says 32 GiB but the output is of a 2 KiB sector",
    );
}

#[test]
fn a_c1_output_whose_proofs_do_not_match_its_commitments_is_refused() {
    let dir = folder("commitments");
    let mut phase1 = common::sealed().phase1.clone();
    phase1.comm_r[3] ^= 0x10;
    let output = c2(&dir, &serde_json::to_vec(&phase1).unwrap(), &[]);
    assert_one_line_error(&output, "vanilla proofs do not verify");
}

#[test]
fn another_miner_is_refused() {
    let dir = folder("miner");
    let output = c2(&dir, &bare_c1(), &["--miner-id", "1001"]);
    assert_one_line_error(&output, "replica id was not made");
    let output = c2(&dir, &bare_c1(), &["--prover-id", "12"]);
    assert_one_line_error(&output, "expected 64 hexadecimal digits");
}

#[test]
fn parameters_of_another_circuit_or_cut_short_are_refused_naming_the_file() {
    let dir = folder("wrong-params");
    let files = ParamsFiles::seal(common::PROOF).unwrap();
    // A tiny circuit's parameters where the 2 KiB ones belong (another test binary's
    // cache: this one's is shared by the tests above, which need it empty).
    let cache = dir.join("params");
    fs::create_dir_all(&cache).unwrap();
    let name = |p: &Path| p.file_name().unwrap().to_owned();
    let params = wgpu_groth16::groth16::ProvingParameters::random_for_shape(
        &wgpu_groth16::groth16::synthesis::synthesize(
            wgpu_groth16::groth16::circuits::SingleConstraint::new(3.into(), 4.into()),
        )
        .unwrap()
        .shape(),
        1,
    );
    let mut bytes = Vec::new();
    params.write(&mut bytes).unwrap();
    fs::write(cache.join(name(&files.params)), &bytes).unwrap();
    let mut vk = Vec::new();
    params.vk.write(&mut vk).unwrap();
    fs::write(cache.join(name(&files.vk)), &vk).unwrap();
    let (c1_path, out) = (dir.join("c1.json"), dir.join("proof"));
    fs::write(&c1_path, bare_c1()).unwrap();
    let c2_with_cache = || {
        run(cli(&[
            "c2",
            "--c1",
            c1_path.to_str().unwrap(),
            "--miner-id",
            &common::MINER_ID.to_string(),
            "--sector-id",
            &common::SECTOR_ID.to_string(),
            "--out",
            out.to_str().unwrap(),
        ])
        .env("FIL_PROOFS_PARAMETER_CACHE", &cache))
    };
    let expected = "is not the parameter file of StackedDrg2KiBV1_1 (2 KiB)";
    let output = c2_with_cache();
    assert_one_line_error(&output, expected);
    assert_one_line_error(&output, "input points");
    assert!(!out.exists());
    // The same file cut short: refused from its counts, before anything is decoded.
    fs::write(cache.join(name(&files.params)), &bytes[..bytes.len() - 100]).unwrap();
    let output = c2_with_cache();
    assert_one_line_error(&output, expected);
    assert_one_line_error(&output, "truncated");
    assert!(!out.exists());
}

/// `seal` of a 2 KiB sector for miner 1000, sector 7, its C1 output to `c1`.
fn seal(c1: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "seal",
        "--proof",
        "StackedDrg2KiBV1_1",
        "--miner-id",
        "1000",
        "--sector-id",
        "7",
        "--out",
        c1.to_str().unwrap(),
    ];
    args.extend(extra);
    run(&mut cli(&args))
}

#[test]
fn seal_writes_c1_outputs_that_c2_reads() {
    let dir = folder("seal");
    for (form, extra) in [("bare", &[][..]), ("curio", &["--curio"][..])] {
        let c1 = dir.join(format!("{form}.json"));
        let sector_dir = dir.join(form);
        let output = seal(
            &c1,
            &[&["--dir", sector_dir.to_str().unwrap()], extra].concat(),
        );
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let output = c2(
            &dir,
            &fs::read(&c1).unwrap(),
            &["--no-sector-id", "--sector-id", "7"],
        );
        // Read, checked against the miner and sector, vanilla proofs verified: only the
        // parameters are missing.
        assert_one_line_error(&output, "not found");
    }
}

/// `seal --benchmark-only` writes a marked C1 output of random vanilla proofs in both forms:
/// `c2` refuses it in one line, and `c2 --benchmark` takes it past the mark and the vanilla
/// check (which it would fail) to the parameters, missing here.
#[test]
fn a_benchmark_only_c1_output_is_refused_unless_c2_is_told_it_is_a_benchmark() {
    let dir = folder("benchmark-only");
    for (form, extra) in [("bare", &[][..]), ("curio", &["--curio"][..])] {
        let c1 = dir.join(format!("{form}.json"));
        let output = seal(&c1, &[&["--benchmark-only"], extra].concat());
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{stdout}");
        assert!(stdout.contains("benchmark-only"), "{stdout}");
        let bytes = fs::read(&c1).unwrap();
        let output = c2(&dir, &bytes, &[]);
        assert_one_line_error(&output, "benchmark-only C1 output");

        fs::write(dir.join("c1.json"), &bytes).unwrap();
        let output = run(&mut cli(&[
            "c2",
            "--c1",
            dir.join("c1.json").to_str().unwrap(),
            "--miner-id",
            "1000",
            "--sector-id",
            "7",
            "--benchmark",
        ]));
        assert_one_line_error(&output, "not found");
    }
}
