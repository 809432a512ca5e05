//! The command line as a user runs it: the built binary, its files, its exit codes (0 done,
//! 1 a failed check, 2 an error) and its one-line errors.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::cli::*;
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
    if common::native_adapter().is_none() {
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
fn proving_on_a_software_adapter_says_so_in_one_line_and_names_the_faster_option() {
    let Some(adapter) = common::native_adapter() else {
        return;
    };
    let dir = scratch("software_note");
    let proof = dir.join("f6.proof");
    for backend in ["vulkan", "gl"] {
        let output = run(prove(&[], &proof).args(["--backend", backend]));
        assert!(output.status.success(), "{output:?}");
        let notes: Vec<String> = stdout(&output)
            .lines()
            .filter(|l| l.starts_with("note: "))
            .map(String::from)
            .collect();
        if adapter.device_type != wgpu::DeviceType::Cpu && backend == "vulkan" {
            assert!(
                notes.is_empty(),
                "a hardware adapter needs no note: {notes:?}"
            );
            continue;
        }
        let faster = match backend {
            "gl" => "apt-get install mesa-vulkan-drivers",
            _ => "BELLMAN_NO_GPU=1",
        };
        assert!(
            notes.len() == 1 && notes[0].contains("software adapter") && notes[0].contains(faster),
            "{backend}: one note naming {faster:?}: {notes:?}"
        );
    }
}

#[test]
fn demo_and_compare_agree_with_the_cpu_and_share_cached_parameters() {
    if common::native_adapter().is_none() {
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
        12,
        "11 stages and the total"
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
    let output = prove_other(&["--circuit", "sha256"]);
    assert_one_line_error(&output, "--circuit sha256 needs --message");
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
    if common::native_adapter().is_none() {
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

#[test]
fn setup_sizes_beyond_the_machine_are_refused_at_once_in_one_line() {
    let dir = scratch("too_large");
    let cases = [
        (
            "sha256",
            "100000000",
            "more than the largest domain BLS12-381 offers",
        ),
        ("sha256", "10000000", "needs at least"),
        ("filecoin-like", "32", "needs at least"),
    ];
    for (circuit, size, expected) in cases {
        let mut setup = cli(&["setup", "--circuit", circuit, "--size", size]);
        setup.args([
            "--params",
            path(&dir.join("p")),
            "--vk",
            path(&dir.join("v")),
        ]);
        let (output, took) = run_bounded(&mut setup, FOUR_GIB, Duration::from_secs(60));
        assert_one_line_error(&output, expected);
        assert!(took < Duration::from_secs(2), "{circuit} {size}: {took:?}");
    }
    assert_eq!(
        fs::read_dir(&dir).unwrap().count(),
        0,
        "no file, no temporary"
    );
}

#[test]
fn a_message_the_parameters_were_not_made_for_is_refused_before_synthesis() {
    let dir = scratch("long_message");
    // 120 KiB: a circuit of some 50 million constraints, gigabytes to synthesize.
    let message = "a".repeat(120 << 10);
    let mut proving = cli(&["prove", "--params", path(&setup().params)]);
    proving.args(["--circuit", "sha256", "--message", &message]);
    proving.args(["--proof", path(&dir.join("m.proof"))]);
    let (output, took) = run_bounded(
        proving.env("BELLMAN_NO_GPU", "1"),
        FOUR_GIB,
        Duration::from_secs(60),
    );
    assert_one_line_error(&output, "was not made for SHA-256 preimage of 122880 bytes");
    assert!(took < Duration::from_secs(2), "{took:?}");
}

#[test]
fn parameters_larger_than_the_machine_are_refused_before_they_are_read() {
    use std::io::{Seek, SeekFrom, Write};
    let dir = scratch("huge_params");
    // The counts of the Filecoin-like circuit of 2^32 constraints around holes: 825 GB of
    // points, none of them on disk.
    let huge = dir.join("f32.params");
    let mut file = fs::File::create(&huge).unwrap();
    file.write_all(&fs::read(&setup().vk).unwrap()).unwrap();
    for points in [(1u64 << 32) - 1, (1 << 32) - 6] {
        file.write_all(&(points as u32).to_be_bytes()).unwrap();
        file.seek(SeekFrom::Current(96 * points as i64)).unwrap();
    }
    file.write_all(&[0; 12]).unwrap(); // no a, b_g1, b_g2 points
    if let Err(e) = file.sync_all() {
        eprintln!("skipping: no sparse file of 825 GB here ({e})");
        return;
    }
    let mut proving = cli(&[
        "prove",
        "--params",
        path(&huge),
        "--proof",
        path(&dir.join("p")),
    ]);
    proving.args(["--circuit", "filecoin-like", "--size", "32"]);
    let (output, took) = run_bounded(
        proving.env("BELLMAN_NO_GPU", "1"),
        FOUR_GIB,
        Duration::from_secs(60),
    );
    assert_one_line_error(
        &output,
        "proving Filecoin-like circuit of size 2^32 needs at least",
    );
    assert!(took < Duration::from_secs(2), "{took:?}");
}

#[test]
fn endless_or_oversized_inputs_are_read_no_further_than_their_format() {
    let dir = scratch("endless");
    let (proof, inputs) = (dir.join("f6.proof"), dir.join("f6.inputs"));
    let proved = run(prove(&["--inputs-out", path(&inputs)], &proof).env("BELLMAN_NO_GPU", "1"));
    assert!(proved.status.success(), "{proved:?}");
    // Read, never written: the endless devices of every Unix.
    let vk = setup().vk.as_path();
    let cases = [
        (
            Path::new("/dev/zero"),
            proof.as_path(),
            &inputs,
            "is not a verifying key file",
        ),
        (
            vk,
            Path::new("/dev/urandom"),
            &inputs,
            "is not a proof file",
        ),
        (
            vk,
            &proof,
            &PathBuf::from("/dev/zero"),
            "is longer than 4 public inputs can be",
        ),
        (
            &setup().params,
            &proof,
            &inputs,
            "bytes follow the verifying key",
        ),
    ];
    for (vk, proof, inputs, expected) in cases {
        let mut verifying = cli(&["verify", "--vk", path(vk), "--proof", path(proof)]);
        verifying.args(["--inputs", path(inputs)]);
        let (output, took) = run_bounded(&mut verifying, FOUR_GIB, Duration::from_secs(60));
        assert_one_line_error(&output, expected);
        assert!(took < Duration::from_secs(2), "{expected}: {took:?}");
    }
}

#[test]
fn a_fifo_or_directory_as_an_input_is_named_and_refused_without_waiting() {
    let dir = scratch("special_inputs");
    let fifo = dir.join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let proof = dir.join("p");
    let prove_with = |params: &Path| {
        let mut command = cli(&["prove", "--params", path(params), "--proof", path(&proof)]);
        command.args(["--circuit", "filecoin-like", "--size", "6"]);
        command.env("BELLMAN_NO_GPU", "1");
        command
    };
    let mut verify_fifo = cli(&["verify", "--vk", path(&fifo), "--proof", path(&proof)]);
    verify_fifo.args(["--inputs", ""]);
    let cases = [
        (prove_with(&fifo), "it is a FIFO, not a regular file"),
        (prove_with(&dir), "it is a directory, not a regular file"),
        // Nobody writes into the FIFO: it ends at once.
        (verify_fifo, "ends too early (0 bytes)"),
    ];
    for (mut command, expected) in cases {
        let (output, took) = run_bounded(&mut command, FOUR_GIB, Duration::from_secs(10));
        assert_one_line_error(&output, expected);
        assert!(took < Duration::from_secs(2), "{expected}: {took:?}");
    }
}

#[test]
fn a_verifying_key_without_ic_points_is_named_as_such() {
    let dir = scratch("no_ic");
    let mut vk = fs::read(&setup().vk).unwrap();
    // The six points, then a count of 0.
    vk.truncate(864);
    vk.extend([0; 4]);
    let empty = dir.join("empty.vk");
    fs::write(&empty, vk).unwrap();
    let mut verifying = cli(&["verify", "--vk", path(&empty)]);
    verifying.args(["--proof", path(&dir.join("p")), "--inputs", ""]);
    assert_one_line_error(&run(&mut verifying), "it has no ic points");
}

#[test]
fn a_cpu_proof_failing_the_parameters_own_key_blames_the_file_not_a_gpu() {
    let dir = scratch("spliced");
    let (other, other_vk) = (dir.join("other.params"), dir.join("other.vk"));
    let made = run(
        cli(&["setup", "--circuit", "filecoin-like", "--size", "6"]).args([
            "--params",
            path(&other),
            "--vk",
            path(&other_vk),
        ]),
    );
    assert!(made.status.success(), "{made:?}");
    // This setup's verifying key before another setup's proving key.
    let vk = fs::read(&setup().vk).unwrap();
    let spliced = [vk.as_slice(), &fs::read(&other).unwrap()[vk.len()..]].concat();
    let params = dir.join("spliced.params");
    fs::write(&params, spliced).unwrap();
    let proof = dir.join("p");
    let output = run(
        cli(&["prove", "--params", path(&params), "--proof", path(&proof)])
            .args(["--circuit", "filecoin-like", "--size", "6"])
            .env("BELLMAN_NO_GPU", "1"),
    );
    assert_one_line_error(&output, "does not belong to its verifying key");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("BELLMAN_NO_GPU"), "{stderr}");
    assert!(!proof.exists());
}

#[test]
fn a_vram_budget_beyond_64_bits_is_a_one_line_error() {
    let dir = scratch("vram_overflow");
    let proof = dir.join("f6.proof");
    // 2^44 MiB is 2^64 bytes.
    let output =
        run(prove(&["--vram-budget-mib", "17592186044416"], &proof).env("BELLMAN_NO_GPU", "1"));
    assert_one_line_error(&output, "more bytes than a 64-bit count holds");
    assert!(!proof.exists());
}

#[test]
fn a_failure_with_json_prints_a_json_error_document() {
    let dir = scratch("json_error");
    let nothing = dir.join("nothing");
    let output = run(cli(&["prove", "--json", "--params", path(&nothing)])
        .args([
            "--proof",
            path(&dir.join("p")),
            "--circuit",
            "filecoin-like",
            "--size",
            "6",
        ])
        .env("BELLMAN_NO_GPU", "1"));
    assert_one_line_error(&output, "cannot read parameters file");
    let error = json(&output)["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        error.starts_with("cannot read parameters file"),
        "{}",
        stdout(&output)
    );
    let usage = run(&mut cli(&["verify", "--json", "--no-such-flag"]));
    assert_eq!(usage.status.code(), Some(2));
    assert!(json(&usage)["error"]
        .as_str()
        .unwrap()
        .contains("--no-such-flag"));
}
