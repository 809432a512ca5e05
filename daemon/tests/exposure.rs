//! The daemon binary says, in one line, when it listens beyond this machine, and refuses a
//! malformed `--allow`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Starts `serve` with `args` on the CPU and returns the log lines up to the one saying it
/// serves (or up to its exit), then stops it.
fn serve_log(args: &[&str]) -> Vec<String> {
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_wgpu-groth16-daemon"))
        .arg("serve")
        .args(args)
        .env("BELLMAN_NO_GPU", "1")
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("the daemon starts");
    let stderr = daemon.stderr.take().expect("piped");
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut lines = Vec::new();
    for line in BufReader::new(stderr).lines() {
        let Ok(line) = line else { break };
        let serving = line.contains("serving cuzk.v1.ProvingEngine");
        lines.push(line);
        if serving || Instant::now() > deadline {
            break;
        }
    }
    let _ = daemon.kill();
    let _ = daemon.wait();
    lines
}

#[test]
fn listening_beyond_loopback_warns_that_there_is_no_authentication() {
    let warned = |lines: &[String]| lines.iter().any(|l| l.contains("no authentication"));
    let open = serve_log(&["--listen", "0.0.0.0:0"]);
    assert!(warned(&open), "{open:#?}");
    assert!(
        open.iter().any(|l| l.contains("limit them with --allow")),
        "{open:#?}"
    );
    let allowed = serve_log(&["--listen", "0.0.0.0:0", "--allow", "10.0.0.0/8"]);
    assert!(
        allowed.iter().any(|l| l.contains("any peer in 10.0.0.0/8")),
        "{allowed:#?}"
    );
    let local = serve_log(&["--listen", "127.0.0.1:0"]);
    assert!(local.iter().any(|l| l.contains("serving")), "{local:#?}");
    assert!(!warned(&local), "{local:#?}");
}

#[test]
fn a_malformed_allow_is_refused() {
    let output = Command::new(env!("CARGO_BIN_EXE_wgpu-groth16-daemon"))
        .args(["serve", "--listen", "127.0.0.1:0", "--allow", "10.0.0.0/33"])
        .env("BELLMAN_NO_GPU", "1")
        .output()
        .expect("the daemon runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("prefix must be 0 to 32 bits"), "{stderr}");
}
