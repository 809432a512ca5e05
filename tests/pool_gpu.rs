//! The buffer pool: reuse, the fence that frees a buffer, and the VRAM budget.

mod common;

use wgpu_groth16::gpu::pool::{BufferPool, PoolStats};
use wgpu_groth16::Error;

const MIB: u64 = 1 << 20;

#[test]
fn buffers_come_back_after_their_fence_and_are_reused() {
    let Some(gpu) = common::gpu(common::Target::Native) else {
        return;
    };
    let pool = BufferPool::new(gpu, 8 * MIB);
    let first = pool.take("test", MIB).unwrap();
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    encoder.clear_buffer(&first, 0, None);
    let fence = gpu.submit([encoder.finish()]);
    pool.give_back(first.clone(), Some(fence.clone()));
    assert_eq!(
        pool.stats(),
        PoolStats {
            allocated_bytes: MIB,
            peak_bytes: MIB,
            free: 0,
            in_flight: 1
        },
        "in flight until its submission is seen to complete"
    );
    gpu.wait_for(fence).unwrap();
    let again = pool.take("test", MIB).unwrap();
    assert_eq!(again, first, "the same buffer, once its fence passed");
    let other = pool.take("test", MIB).unwrap();
    assert_ne!(other, first);
    assert_eq!(pool.stats().allocated_bytes, 2 * MIB);
    pool.give_back(again, None);
    pool.give_back(other, None);
    for _ in 0..50 {
        let (a, b) = (
            pool.take("test", MIB).unwrap(),
            pool.take("test", MIB).unwrap(),
        );
        pool.give_back(a, None);
        pool.give_back(b, None);
    }
    assert_eq!(
        pool.stats().allocated_bytes,
        2 * MIB,
        "no growth over 50 rounds"
    );
}

#[test]
fn the_budget_is_never_exceeded() {
    let Some(gpu) = common::gpu(common::Target::Native) else {
        return;
    };
    let pool = BufferPool::new(gpu, 3 * MIB);
    let err = pool.take("a big vector", 4 * MIB).unwrap_err();
    assert!(
        matches!(err, Error::VramBudget { needed, budget, .. } if needed == 4 * MIB && budget == 3 * MIB),
        "{err}"
    );
    let held: Vec<_> = (0..3).map(|_| pool.take("test", MIB).unwrap()).collect();
    let err = pool.take("a fourth", MIB).unwrap_err();
    assert!(
        matches!(err, Error::VramBudget { .. }),
        "nothing in flight to wait for: {err}"
    );
    // A buffer in flight is waited for (on its own fence) rather than exceeding the budget.
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    encoder.clear_buffer(&held[0], 0, None);
    let fence = gpu.submit([encoder.finish()]);
    let mut held = held.into_iter();
    pool.give_back(held.next().unwrap(), Some(fence));
    let reused = pool.take("a fourth", MIB).unwrap();
    assert_eq!(pool.stats().allocated_bytes, 3 * MIB);
    // Free buffers of another size make room for a new size.
    pool.give_back(reused, None);
    pool.give_back(held.next().unwrap(), None);
    let two = pool.take("two MiB", 2 * MIB).unwrap();
    assert_eq!(two.size(), 2 * MIB);
    assert!(pool.stats().allocated_bytes <= 3 * MIB);
    assert!(
        pool.set_aside(2 * MIB).is_none(),
        "resident data counts against the budget"
    );
}

#[test]
fn reservations_count_against_the_budget_until_dropped() {
    let Some(gpu) = common::gpu(common::Target::Native) else {
        return;
    };
    let pool = BufferPool::new(gpu, 4 * MIB);
    let workspace = pool.reserve("a workspace", 3 * MIB).unwrap();
    assert_eq!(pool.stats().allocated_bytes, 3 * MIB);
    let vector = pool.take("a vector", MIB).unwrap();
    let err = pool.reserve("a second workspace", MIB).unwrap_err();
    assert!(matches!(err, Error::VramBudget { .. }), "{err}");
    // A buffer in flight is waited for, then dropped to make room for the reservation.
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    encoder.clear_buffer(&vector, 0, None);
    pool.give_back(vector, Some(gpu.submit([encoder.finish()])));
    let second = pool.reserve("a second workspace", MIB).unwrap();
    assert_eq!(pool.stats().allocated_bytes, 4 * MIB);
    drop((workspace, second));
    assert_eq!(pool.stats().allocated_bytes, 0);
}

#[test]
fn a_new_budget_drops_the_free_buffers() {
    let Some(gpu) = common::gpu(common::Target::Native) else {
        return;
    };
    let pool = BufferPool::new(gpu, 8 * MIB);
    let _held = pool.take("held", MIB).unwrap();
    let finished = pool.take("finished", 2 * MIB).unwrap();
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    encoder.clear_buffer(&finished, 0, None);
    let fence = gpu.submit([encoder.finish()]);
    pool.give_back(finished, Some(fence.clone()));
    pool.give_back(pool.take("free", 3 * MIB).unwrap(), None);
    gpu.wait_for(fence).unwrap();
    pool.set_budget(2 * MIB);
    let stats = pool.stats();
    assert_eq!(stats.allocated_bytes, MIB, "only what is held: {stats:?}");
    assert_eq!((stats.free, stats.in_flight), (0, 0));
}
