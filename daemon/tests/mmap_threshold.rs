//! The daemon's glibc mmap threshold stays fixed: a large block freed is unmapped, and the
//! next one of its size is mapped again rather than taken from an arena that keeps it once
//! freed. A file of its own: the count of mapped blocks is the process's.

#![cfg(all(target_os = "linux", target_env = "gnu"))]

use wgpu_groth16_daemon::{fix_mmap_threshold, MMAP_THRESHOLD};

#[test]
fn large_blocks_stay_mapped_after_one_is_freed() {
    assert!(fix_mmap_threshold());
    // SAFETY: mallinfo2 only reads the allocator's counters.
    let mapped = || unsafe { libc::mallinfo2() }.hblks;
    let size = 32 * MMAP_THRESHOLD;
    let first = std::hint::black_box(vec![1u8; size]);
    let with_first = mapped();
    drop(first);
    // glibc's dynamic threshold would now be past `size`: this one would come from an arena.
    let second = std::hint::black_box(vec![2u8; size]);
    assert_eq!(
        mapped(),
        with_first,
        "a {size}-byte block after one was freed is not mapped: the threshold moved"
    );
    drop(second);
}
