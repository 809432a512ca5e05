//! The library opens devices without a word on stderr when `XDG_RUNTIME_DIR` is unset
//! (containers, ssh commands, services), where Mesa's Vulkan device-select layer used to
//! print "error: XDG_RUNTIME_DIR is invalid or not set in the environment." for each probe.
//! The test runs itself again as a child process with that environment and reads the child's
//! stderr (its own binary: the variable is read when the first instance is created).

mod common;

use std::process::Command;

const CHILD: &str = "WGPU_GROTH16_QUIET_ENVIRONMENT_CHILD";

#[test]
fn opening_every_adapter_without_a_runtime_directory_prints_nothing_on_stderr() {
    if std::env::var_os(CHILD).is_some() {
        // The child: every adapter of every backend, and a device on the best one.
        let adapters = wgpu_groth16::gpu::context::enumerate_adapters(&Default::default());
        eprintln!("{} adapters", adapters.len());
        if let Some(gpu) = common::gpu(common::Target::Native) {
            eprintln!("opened {}", gpu.describe());
        }
        return;
    }
    let output = Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "opening_every_adapter_without_a_runtime_directory_prints_nothing_on_stderr",
            "--exact",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("NODEVICE_SELECT")
        .env_remove("MESA_VK_DEVICE_SELECT")
        .env_remove("RUST_LOG")
        .output()
        .expect("the test binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the child failed: {stderr}");
    let foreign: Vec<&str> = stderr
        .lines()
        .filter(|l| {
            !l.ends_with(" adapters") && !l.starts_with("opened ") && !l.starts_with("skipping: ")
        })
        .collect();
    assert!(
        stderr.contains(" adapters") && foreign.is_empty(),
        "stderr should hold only the child's own lines: {stderr}"
    );
}
