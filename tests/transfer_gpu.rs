//! Host <-> device copies from many threads at once.

mod common;

use std::sync::{mpsc, Mutex};
use std::time::Duration;

/// Uploads and read-backs run under locks (the MSM workspace, the staging buffers) on rayon
/// threads. If a copy waited for rayon tasks, the waiting thread would run another queued
/// task meanwhile; here that task wants the lock its own stack holds, so the old copies
/// deadlocked this test (and a two-worker batch).
#[test]
fn copies_under_a_lock_on_rayon_threads_do_not_deadlock() {
    let Some(gpu) = common::gpu(common::Target::Native) else {
        return;
    };
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        let workspace = Mutex::new(());
        // Like the prover's workers: OS threads handing lock-taking jobs to the rayon pool.
        let result = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..3u8)
                .map(|w| {
                    let (pool, workspace) = (&pool, &workspace);
                    scope.spawn(move || {
                        (0..12u8).try_for_each(|k| {
                            let bytes: Vec<u8> = (0..9 << 20)
                                .map(|i: u32| (i as u8) ^ k ^ (w << 4))
                                .collect();
                            pool.install(|| {
                                let _held = workspace.lock().unwrap();
                                let buffer = gpu.storage_buffer("copy test", &bytes)?;
                                let back = gpu.read_buffer(&buffer)?;
                                assert!(back == bytes, "round trip {w}/{k} differs");
                                Ok::<_, wgpu_groth16::Error>(())
                            })
                        })
                    })
                })
                .collect();
            workers.into_iter().try_for_each(|w| w.join().unwrap())
        });
        let _ = done.send(result);
    });
    match finished.recv_timeout(Duration::from_secs(120)) {
        Ok(result) => result.unwrap(),
        Err(_) => panic!("copies under a lock did not finish in 120 s: deadlock"),
    }
}

/// Submissions and polls from many threads at once. wgpu-core 30.0.2 panics when two device
/// maintenances race (a poll waiting on submission i against another thread's submit or poll
/// retiring i); `GpuContext` serializes them. Without that lock this test panicked in CI.
#[test]
fn submissions_and_polls_from_many_threads_do_not_race() {
    let Some(gpu) = common::gpu(common::Target::Native) else {
        return;
    };
    std::thread::scope(|scope| {
        for t in 0..4 {
            scope.spawn(move || {
                for i in 0..2000 {
                    let submission = gpu.submit([]);
                    if (i + t) % 2 == 0 {
                        gpu.wait_for(submission).unwrap();
                    } else {
                        gpu.has_completed(submission).unwrap();
                    }
                }
            });
        }
    });
}
