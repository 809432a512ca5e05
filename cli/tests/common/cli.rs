//! The command line as the tests run it: the built binary in a clean environment, scratch
//! folders, the parameters of a small circuit made once per test binary, and assertions on
//! exit codes and one-line errors.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

/// A fresh folder for one test under Cargo's scratch space for integration tests.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(env!("CARGO_CRATE_NAME"))
        .join(name);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// The binary, with nothing from the caller's environment that changes what it does, and no
/// `XDG_RUNTIME_DIR`, as in containers, ssh commands and services: every assertion on stderr
/// then also says that the drivers printed nothing there.
pub fn cli(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_wgpu-groth16"));
    command.args(args);
    for var in [
        "BELLMAN_NO_GPU",
        "RUST_LOG",
        "RUST_BACKTRACE",
        "WGPU_ADAPTER_NAME",
        "WGPU_GROTH16_PARAMS_CACHE",
        "XDG_RUNTIME_DIR",
        "NODEVICE_SELECT",
        "MESA_VK_DEVICE_SELECT",
    ] {
        command.env_remove(var);
    }
    command
}

pub fn run(command: &mut Command) -> Output {
    command.output().expect("the binary runs")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not one JSON document ({e}): {}", stdout(output)))
}

/// Asserts exit status 2 and one line on stderr, `error: ...` containing `expected`.
pub fn assert_one_line_error(output: &Output, expected: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.starts_with("error: ") && stderr.contains(expected),
        "expected an error line containing {expected:?}: {stderr}"
    );
}

pub fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Parameters and verifying key of the Filecoin-like circuit of 2^6 constraints, made once
/// by `setup` for every test of this binary.
pub struct Setup {
    pub params: PathBuf,
    pub vk: PathBuf,
}

pub fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let dir = scratch("setup");
        let (params, vk) = (dir.join("f6.params"), dir.join("f6.vk"));
        let output = run(
            cli(&["setup", "--circuit", "filecoin-like", "--size", "6"]).args([
                "--params",
                path(&params),
                "--vk",
                path(&vk),
            ]),
        );
        assert!(output.status.success(), "{output:?}");
        Setup { params, vk }
    })
}

/// `prove` with the fixture's parameters: `extra` then the circuit's arguments.
pub fn prove(extra: &[&str], proof: &Path) -> Command {
    let mut command = cli(&["prove"]);
    command
        .args(extra)
        .args(["--params", path(&setup().params), "--proof", path(proof)])
        .args(["--circuit", "filecoin-like", "--size", "6", "--seed", "5"]);
    command
}

pub fn verify(proof: &Path, inputs: &str) -> Command {
    let mut command = cli(&["verify", "--vk", path(&setup().vk), "--proof", path(proof)]);
    command.args(["--inputs", inputs]);
    command
}

/// Runs `command` with at most `memory` bytes of address space and for at most `limit`:
/// what must be refused at once is refused at once, and a regression fails the test (an
/// allocation abort, a kill) instead of exhausting the machine or hanging.
pub fn run_bounded(command: &mut Command, memory: u64, limit: Duration) -> (Output, Duration) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let rlimit = libc::rlimit {
            rlim_cur: memory,
            rlim_max: memory,
        };
        // SAFETY: setrlimit is async-signal-safe and touches only the child.
        unsafe {
            command.pre_exec(move || {
                if libc::setrlimit(libc::RLIMIT_AS, &rlimit) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
    }
    let start = Instant::now();
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            let output = child.wait_with_output().unwrap();
            panic!("still running after {limit:?}: {output:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    (child.wait_with_output().unwrap(), start.elapsed())
}

/// 4 GiB: far more than any refusal needs, far less than the jobs refused.
pub const FOUR_GIB: u64 = 4 << 30;

/// The temporary and backup files (`.NAME.PID.N.tmp` / `.old`) in `dir`.
pub fn leftovers(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with('.') && (name.ends_with(".tmp") || name.ends_with(".old")))
        .collect()
}
