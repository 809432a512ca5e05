//! Nothing in the crate waits on the whole device (supraseal-c2's lesson, docs/design.md, "The
//! two-stage pipeline and the two locks": one device-wide wait inside the staging path turns
//! two locks back into one). Every wait goes through `GpuContext::wait_for` /
//! `has_completed`, which name one submission and poll without blocking; this test keeps it
//! so by reading the sources.

use std::path::Path;

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_wait_names_one_submission() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    // The library and every binary of the workspace.
    for dir in ["src", "cli/src", "filecoin/src", "daemon/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 10, "sources not found under {root:?}");
    let wait_layer = root.join("src/gpu/mod.rs");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for forbidden in [
            "wait_indefinitely",
            "submission_index: None",
            "PollType::Poll",
        ] {
            assert!(!text.contains(forbidden), "{file:?} uses {forbidden}");
        }
        let polls = text.matches(".poll(").count();
        // Submissions go through `GpuContext::submit`, under the lock the polls hold.
        let submits = text.matches("queue.submit(").count();
        if file == wait_layer {
            // wait_for polls through has_completed, which never blocks: a poll that blocked
            // under the maintenance lock starved other threads' submissions.
            assert_eq!(polls, 1, "has_completed is the only poll");
            assert_eq!(text.matches("submission_index: Some(submission").count(), 1);
            assert_eq!(text.matches("timeout: Some(Duration::ZERO)").count(), 1);
            assert_eq!(submits, 1, "GpuContext::submit is the only submission");
        } else {
            assert_eq!(polls, 0, "{file:?} polls the device outside the wait layer");
            assert_eq!(submits, 0, "{file:?} submits outside GpuContext::submit");
        }
    }
}
