//! The harness of the hostile-bytes tests: seeded mutants of valid inputs, and a runner
//! that answers whether a decoder met each with a value or an error, no panic, no hang and
//! no allocation out of proportion to the input. Included by the test crates that use it
//! (its global allocator records the largest allocation).
//!
//! A property test with arbitrary inputs, not a coverage-guided fuzzer (cargo-fuzz is not
//! available on the machines this was built on). Its corpus is what it generates from
//! fixed seeds: a failure prints the input's target, mutant number and bytes' length, and
//! writes the bytes to the scratch folder. `HOSTILE_INPUTS=N` runs N mutants a target
//! instead of the CI-sized default.

#![allow(dead_code)] // each test binary uses its own part of this module

use std::alloc::{GlobalAlloc, Layout, System};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// The system allocator, remembering the largest single allocation asked of it.
struct Largest;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: Largest = Largest;

/// Mutants a target runs in CI.
const CI_INPUTS: usize = 2000;

/// No input may take longer.
const SLOWEST: Duration = Duration::from_secs(10);

pub fn inputs_per_target() -> usize {
    std::env::var("HOSTILE_INPUTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(CI_INPUTS)
}

/// Mutant `k` of `valid`, drawn from `seed`.
pub fn mutant(valid: &[u8], seed: u64, k: usize) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ ((k as u64) << 20));
    let mut bytes = valid.to_vec();
    let at = |len: usize, rng: &mut ChaCha8Rng| (rng.next_u64() as usize) % len.max(1);
    for _ in 0..1 + rng.next_u32() % 3 {
        match rng.next_u32() % 6 {
            0 => {
                for _ in 0..1 + rng.next_u32() % 8 {
                    let i = at(bytes.len(), &mut rng);
                    if let Some(b) = bytes.get_mut(i) {
                        *b ^= 1 << (rng.next_u32() % 8);
                    }
                }
            }
            1 => {
                let cut = at(bytes.len(), &mut rng);
                bytes.truncate(cut);
            }
            2 => {
                let i = at(bytes.len(), &mut rng);
                let extra: Vec<u8> = (0..1 + rng.next_u32() % 16)
                    .map(|_| rng.next_u32() as u8)
                    .collect();
                bytes.splice(i.min(bytes.len())..i.min(bytes.len()), extra);
            }
            3 => {
                let start = at(bytes.len(), &mut rng);
                let end = (start + 1 + at(1024, &mut rng)).min(bytes.len());
                let run = bytes[start.min(end)..end].to_vec();
                bytes.splice(start.min(end)..start.min(end), run);
            }
            4 => {
                // A digit for another: JSON stays JSON, so the checks behind the parser run.
                let digits: Vec<usize> = (0..bytes.len())
                    .filter(|&i| bytes[i].is_ascii_digit())
                    .collect();
                for _ in 0..1 + rng.next_u32() % 4 {
                    if let Some(&i) = digits.get(at(digits.len(), &mut rng)) {
                        bytes[i] = b'0' + (rng.next_u32() % 10) as u8;
                    }
                }
            }
            _ => {
                let huge =
                    [u64::MAX, 1 << 60, 1 << 32, u32::MAX as u64][rng.next_u32() as usize % 4];
                let i = at(bytes.len().saturating_sub(8), &mut rng);
                if let Some(window) = bytes.get_mut(i..i + 8) {
                    window.copy_from_slice(&huge.to_le_bytes());
                }
            }
        }
    }
    bytes
}

/// Runs `decode` on every input; returns the failures (a panic, too slow, too large an
/// allocation), each named.
pub fn hostile<T, E>(
    target: &str,
    inputs: impl IntoIterator<Item = (String, Vec<u8>)>,
    decode: impl Fn(&[u8]) -> Result<T, E>,
) -> Vec<String> {
    let mut failures = Vec::new();
    let (mut count, mut accepted, mut largest_seen) = (0, 0, 0);
    let start_all = Instant::now();
    for (name, bytes) in inputs {
        count += 1;
        LARGEST.store(0, Ordering::Relaxed);
        let start = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| decode(&bytes).is_ok()));
        let (took, largest) = (start.elapsed(), LARGEST.load(Ordering::Relaxed));
        // Copies of the input and what it decodes to, but nothing sized by a length field.
        let bound = 8 * bytes.len() + (64 << 20);
        largest_seen = largest_seen.max(largest);
        accepted += usize::from(matches!(outcome, Ok(true)));
        let why = match outcome {
            Err(_) => Some("panicked".to_string()),
            Ok(_) if took > SLOWEST => Some(format!("took {took:?}")),
            Ok(_) if largest > bound => Some(format!("allocated {largest} bytes at once")),
            Ok(_) => None,
        };
        if let Some(why) = why {
            let path = crate::common::scratch().join(format!("hostile-{target}-{name}.bin"));
            let _ = std::fs::write(&path, &bytes);
            failures.push(format!(
                "{target} {name} ({} bytes, {}): {why}",
                bytes.len(),
                path.display()
            ));
        }
    }
    eprintln!(
        "{target}: {count} inputs in {:.2} s, {accepted} accepted, the largest allocation \
         {largest_seen} bytes",
        start_all.elapsed().as_secs_f64()
    );
    failures
}

pub fn mutants(valid: Vec<u8>, seed: u64) -> impl Iterator<Item = (String, Vec<u8>)> {
    (0..inputs_per_target()).map(move |k| (format!("mutant {k}"), mutant(&valid, seed, k)))
}
