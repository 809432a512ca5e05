//! The command line as a user runs it: the built binary, its files, its exit codes (0 done,
//! 1 a failed check, 2 an error) and its one-line errors.

mod common;

use std::fs;

use common::cli::*;
use common::Target;
use serde_json::Value;

#[test]
fn setup_prove_verify_round_trip_on_the_cpu() {
    let dir = scratch("round_trip");
    let (proof, inputs) = (dir.join("f6.proof"), dir.join("f6.inputs"));
    let proved = run(prove(&["--inputs-out", path(&inputs)], &proof).env("BELLMAN_NO_GPU", "1"));
    assert!(proved.status.success(), "{proved:?}");
    assert!(
        stdout(&proved).contains("engine: CPU"),
        "{}",
        stdout(&proved)
    );
    assert_eq!(fs::read(&proof).unwrap().len(), 192);
    let lines = fs::read_to_string(&inputs).unwrap();
    assert_eq!(lines.lines().count(), 4, "four public inputs: {lines}");

    let from_file = run(&mut verify(&proof, path(&inputs)));
    assert_eq!(from_file.status.code(), Some(0), "{from_file:?}");
    assert_eq!(stdout(&from_file).trim(), "valid");
    let list = lines.lines().collect::<Vec<_>>().join(",");
    let from_list = run(&mut verify(&proof, &list));
    assert_eq!(stdout(&from_list).trim(), "valid");
}

#[test]
fn verify_with_a_wrong_input_exits_1_and_says_invalid() {
    let dir = scratch("wrong_inputs");
    let proof = dir.join("f6.proof");
    let proved = run(prove(&["--json"], &proof).env("BELLMAN_NO_GPU", "1"));
    let inputs = json(&proved)["inputs"]["hex"].clone();
    let mut inputs: Vec<String> = serde_json::from_value(inputs).unwrap();
    // The first byte is the least significant: flipping its low bit keeps the value canonical.
    let first = u8::from_str_radix(&inputs[0][..2], 16).unwrap() ^ 1;
    inputs[0].replace_range(..2, &format!("{first:02x}"));

    let text = run(&mut verify(&proof, &inputs.join(",")));
    assert_eq!(text.status.code(), Some(1), "{text:?}");
    assert!(stdout(&text).starts_with("invalid"), "{}", stdout(&text));
    let as_json = run(verify(&proof, &inputs.join(",")).arg("--json"));
    assert_eq!(as_json.status.code(), Some(1));
    assert_eq!(json(&as_json)["valid"], Value::Bool(false));
}

#[test]
fn prove_on_the_gpu_gives_json_and_a_proof_that_verifies() {
    // Skips without an adapter, fails under CI=true.
    if common::gpu(Target::Native).is_none() {
        return;
    }
    let dir = scratch("gpu");
    let (proof, trace) = (dir.join("f6.proof"), dir.join("f6.trace.json"));
    let proved = run(&mut prove(&["--json", "--trace", path(&trace)], &proof));
    assert!(proved.status.success(), "{proved:?}");
    let trace: Value = serde_json::from_slice(&fs::read(&trace).unwrap()).unwrap();
    let names: Vec<&str> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    for stage in ["synthesize 0", "prove 0", "H step", "MSM H", "MSM B G2"] {
        assert!(names.contains(&stage), "no {stage} in the trace: {names:?}");
    }
    let report = json(&proved);
    assert_ne!(report["engine"], "CPU", "{report}");
    assert_eq!(report["circuit"]["constraints"], 63);
    let stages = report["stages"].as_array().unwrap();
    assert_eq!(stages.last().unwrap()["stage"], "total");
    assert!(stages.iter().all(|s| s["time"].is_f64()), "{report}");
    let hex = report["proof"]["hex"].as_str().unwrap();
    assert_eq!(hex.len(), 2 * 192);

    let inputs: Vec<&str> = report["inputs"]["hex"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let verified = run(verify(&proof, &inputs.join(",")).arg("--json"));
    assert_eq!(verified.status.code(), Some(0), "{verified:?}");
    assert_eq!(json(&verified)["valid"], Value::Bool(true));
}

#[test]
fn demo_and_compare_agree_with_the_cpu_and_share_cached_parameters() {
    if common::gpu(Target::Native).is_none() {
        return;
    }
    let cache = scratch("cache");
    let small = ["--circuit", "filecoin-like", "--size", "6", "--json"];
    let demo = run(cli(&["demo", "--random", "8"])
        .args(small)
        .env("WGPU_GROTH16_PARAMS_CACHE", &cache));
    assert_eq!(demo.status.code(), Some(0), "{demo:?}");
    let report = json(&demo);
    assert_eq!(report["failures"], Value::Array(vec![]), "{report}");
    assert_eq!(report["equal_to_bellperson"]["gpu"], true);
    assert_eq!(report["verifier"]["refuses_wrong_inputs"], true);
    assert_eq!(
        report["proof"].as_array().unwrap().len(),
        10,
        "9 stages and the total"
    );
    assert!(report["params"].as_str().unwrap().starts_with("generated"));
    let cached = cache
        .join(env!("CARGO_PKG_VERSION"))
        .join("filecoin-like-6.params");
    assert!(cached.is_file(), "{cached:?}");

    // The native backends only: the GL adapter's compile costs a minute on llvmpipe.
    let compare = run(
        cli(&["compare", "--backend", "vulkan,metal,dx12", "--log-n", "6"])
            .args(small)
            .env("WGPU_GROTH16_PARAMS_CACHE", &cache),
    );
    assert_eq!(compare.status.code(), Some(0), "{compare:?}");
    let report = json(&compare);
    assert!(report["params"].as_str().unwrap().starts_with("read from"));
    let rows = report["rows"].as_array().unwrap();
    let on = |backend: bool| {
        rows.iter()
            .filter(move |r| (r["backend"] == "CPU") != backend)
    };
    assert_eq!(on(false).count(), 5, "4 kernels and a proof on the CPU");
    let compared: Vec<&Value> = on(true).filter(|r| !r["equal_to_cpu"].is_null()).collect();
    assert!(
        !compared.is_empty() && compared.len().is_multiple_of(5),
        "4 kernels and a proof on each adapter: {report}"
    );
    assert!(
        compared.iter().all(|r| r["equal_to_cpu"] == true),
        "{report}"
    );
}

#[test]
fn missing_files_are_one_line_errors() {
    let dir = scratch("missing");
    let (nothing, proof) = (dir.join("nothing"), dir.join("f6.proof"));
    let output = run(
        cli(&["prove", "--params", path(&nothing), "--proof", path(&proof)])
            .args(["--circuit", "filecoin-like", "--size", "6"])
            .env("BELLMAN_NO_GPU", "1"),
    );
    assert_one_line_error(&output, "cannot read parameters file");
    let output = run(
        cli(&["verify", "--vk", path(&nothing), "--proof", path(&proof)]).args(["--inputs", ""]),
    );
    assert_one_line_error(&output, "cannot read verifying key");
    let output = run(cli(&["verify", "--vk", path(&setup().vk)]).args([
        "--proof",
        path(&nothing),
        "--inputs",
        "",
    ]));
    assert_one_line_error(&output, "cannot read proof");
}

#[test]
fn truncated_and_foreign_files_are_one_line_errors() {
    let dir = scratch("truncated");
    let params = fs::read(&setup().params).unwrap();
    let (truncated, proof) = (dir.join("truncated.params"), dir.join("f6.proof"));
    fs::write(&truncated, &params[..params.len() - 100]).unwrap();
    let output = run(cli(&[
        "prove",
        "--params",
        path(&truncated),
        "--proof",
        path(&proof),
    ])
    .args(["--circuit", "filecoin-like", "--size", "6"])
    .env("BELLMAN_NO_GPU", "1"));
    assert_one_line_error(&output, "truncated in section b_g2");

    // A .params file begins with its verifying key, and then goes on.
    let output = run(cli(&["verify", "--vk", path(&setup().params)]).args([
        "--proof",
        path(&proof),
        "--inputs",
        "",
    ]));
    assert_one_line_error(&output, "is not a verifying key file");

    let short = dir.join("short.proof");
    fs::write(&short, [0u8; 100]).unwrap();
    assert_one_line_error(&run(&mut verify(&short, "")), "ends too early");
    let not_a_proof = dir.join("vk-as.proof");
    fs::write(&not_a_proof, &fs::read(&setup().vk).unwrap()[..192]).unwrap();
    assert_one_line_error(&run(&mut verify(&not_a_proof, "")), "is not a proof file");
}

#[test]
fn wrong_inputs_and_circuits_are_one_line_errors() {
    let dir = scratch("mismatch");
    let proof = dir.join("f6.proof");
    let proved =
        run(prove(&["--inputs-out", path(&dir.join("in"))], &proof).env("BELLMAN_NO_GPU", "1"));
    assert!(proved.status.success());
    assert_one_line_error(&run(&mut verify(&proof, "nonsense")), "not 64 hex digits");
    assert_one_line_error(&run(&mut verify(&proof, "")), "takes 4 public inputs");

    let other = dir.join("other.proof");
    let prove_other = |circuit: &[&str]| {
        run(cli(&["prove", "--params", path(&setup().params)])
            .args(["--proof", path(&other)])
            .args(circuit)
            .env("BELLMAN_NO_GPU", "1"))
    };
    let output = prove_other(&["--circuit", "filecoin-like", "--size", "7"]);
    assert_one_line_error(
        &output,
        "was not made for Filecoin-like circuit of size 2^7",
    );
    let output = prove_other(&["--circuit", "sha256", "--message", "hello"]);
    assert_one_line_error(&output, "was not made for SHA-256 preimage of 5 bytes");
    assert!(!other.exists(), "a failed prove writes no proof");
}

#[test]
fn listing_adapters_without_a_runtime_directory_prints_nothing_on_stderr() {
    let output = run(&mut cli(&["info"]));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "stderr: {stderr}");
    assert!(stderr.is_empty(), "driver noise on stderr: {stderr}");
}

#[test]
fn an_adapter_that_does_not_exist_is_a_one_line_error() {
    let dir = scratch("no_adapter");
    let proof = dir.join("f6.proof");
    for args in [
        &["demo", "--adapter", "no adapter is called this"][..],
        &["compare", "--adapter", "no adapter is called this"],
    ] {
        assert_one_line_error(&run(&mut cli(args)), "no GPU adapter");
    }
    let output = run(&mut prove(
        &["--adapter", "no adapter is called this"],
        &proof,
    ));
    assert_one_line_error(&output, "no GPU adapter");
    assert!(!proof.exists());
}

#[test]
fn a_vram_budget_too_small_for_the_proof_is_a_one_line_error() {
    if common::gpu(Target::Native).is_none() {
        return;
    }
    let dir = scratch("vram_budget");
    let proof = dir.join("f6.proof");
    let output = run(&mut prove(&["--vram-budget-mib", "0"], &proof));
    assert_one_line_error(&output, "VRAM budget of 0 bytes");
    assert!(!proof.exists());
}

#[test]
fn a_failed_setup_leaves_neither_file() {
    let dir = scratch("failed_setup");
    let params = dir.join("f6.params");
    let output = run(cli(&["setup", "--circuit", "filecoin-like", "--size", "6"])
        .args(["--params", path(&params)])
        .args(["--vk", path(&dir.join("no such folder").join("f6.vk"))]));
    assert_one_line_error(&output, "cannot write");
    assert_eq!(
        fs::read_dir(&dir).unwrap().count(),
        0,
        "no file, no temporary"
    );
}
