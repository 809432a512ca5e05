//! Hostile bytes: the decoders of bytes from elsewhere answer every input with a value or an
//! error, with no panic, no hang and no allocation out of proportion to the input. The
//! decoders: C1 outputs (filecoin-proofs-api's JSON, Curio's base64 wrapper) through the
//! checks `c2` and the daemon run, PoSt and SnapDeals vanilla proofs (bincode) as their jobs
//! read them, parameter files (their counts, then every point) and recorded constraint
//! systems' files. The inputs: seeded mutations of valid ones (bits flipped, cut short,
//! bytes inserted, runs repeated, digits changed, 8-byte windows set to huge lengths) and
//! hand-made ones (nesting 100,000 deep, a length of 2^60, truncated base64, 100 MB of junk).
//!
//! A property test with arbitrary inputs, not a coverage-guided fuzzer (cargo-fuzz is not
//! available on the machines this was built on). Its corpus is what it generates from fixed seeds: a failure prints the input's
//! target, mutant number and bytes' length, and writes the bytes to the scratch folder.
//! `HOSTILE_INPUTS=N` runs N mutants a target instead of the CI-sized default.

mod common;

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

fn inputs_per_target() -> usize {
    std::env::var("HOSTILE_INPUTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(CI_INPUTS)
}

/// Mutant `k` of `valid`, drawn from `seed`.
fn mutant(valid: &[u8], seed: u64, k: usize) -> Vec<u8> {
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
fn hostile<T, E>(
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
            let path = common::scratch().join(format!("hostile-{target}-{name}.bin"));
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

fn mutants(valid: Vec<u8>, seed: u64) -> impl Iterator<Item = (String, Vec<u8>)> {
    (0..inputs_per_target()).map(move |k| (format!("mutant {k}"), mutant(&valid, seed, k)))
}

#[test]
fn hostile_bytes_get_an_answer_from_every_decoder() {
    use filecoin_proofs_api::RegisteredPoStProof;
    use wgpu_groth16::groth16::params::CpuSubgroupCheck;
    use wgpu_groth16::groth16::{CheckRecords, ProvingParameters};
    use wgpu_groth16_filecoin::c1::C1Output;
    use wgpu_groth16_filecoin::post::PostJob;
    use wgpu_groth16_filecoin::update::UpdateJob;
    use wgpu_groth16_filecoin::SealCommit;

    let sealed = common::sealed();
    let mut failures = Vec::new();

    // C1 outputs: the sealed 2 KiB sector's, bare and in Curio's wrapper, and hand-made ones.
    let bare = serde_json::to_vec(&sealed.phase1).unwrap();
    let wrap = |inner: &str| {
        format!(r#"{{"SectorNum": 7, "Phase1Out": "{inner}", "SectorSize": 2048}}"#).into_bytes()
    };
    use base64::Engine as _;
    let wrapped = wrap(&base64::engine::general_purpose::STANDARD.encode(&bare));
    let mut made = vec![
        (
            "nested arrays".to_string(),
            "[".repeat(100_000).into_bytes(),
        ),
        (
            "nested objects".to_string(),
            r#"{"a":"#.repeat(100_000).into_bytes(),
        ),
        ("truncated base64".to_string(), wrap("eyJyZWdpc3RlcmVkX3By")),
        ("base64 without padding".to_string(), wrap("eyJ")),
        (
            "a huge number".to_string(),
            br#"{"registered_proof": 184467440737095516160000}"#.to_vec(),
        ),
    ];
    let mut junk = vec![b' '; 100 << 20];
    junk.extend_from_slice(b"{\"registered_proof\": [");
    made.push(("100 MB of junk".to_string(), junk));
    // Read, then checked as c2 and the daemon check it before proving.
    let decode_c1 = |bytes: &[u8]| {
        let c1 = C1Output::from_json(bytes, "hostile")?;
        let commit = SealCommit::new(c1.phase1, sealed.prover_id, sealed.sector_id)?;
        commit.check_vanilla_proofs()
    };
    failures.extend(hostile(
        "c1",
        made.into_iter().chain(mutants(bare, 1)),
        decode_c1,
    ));
    failures.extend(hostile("c1-wrapper", mutants(wrapped, 2), decode_c1));

    // Winning PoSt vanilla proofs as its job reads them.
    let proof = RegisteredPoStProof::StackedDrgWinning2KiBV1;
    let randomness = common::randomness(31);
    let vanilla = common::post_vanilla(proof, &randomness).remove(0);
    let mut huge_length = (1u64 << 60).to_le_bytes().to_vec();
    huge_length.extend_from_slice(&vanilla[8..64]);
    let made = [("a length of 2^60".to_string(), huge_length)];
    failures.extend(hostile(
        "post",
        made.into_iter().chain(mutants(vanilla, 3)),
        |bytes: &[u8]| PostJob::winning(proof, randomness, sealed.prover_id, vec![bytes.to_vec()]),
    ));

    // A SnapDeals update's partition proofs.
    let update = common::snap_update(32);
    failures.extend(hostile(
        "snap",
        mutants(update.vanilla[0].clone(), 4),
        |bytes: &[u8]| {
            UpdateJob::new(
                update.proof,
                vec![bytes.to_vec()],
                update.comm_r_old,
                update.comm_r_new,
                update.comm_d_new,
            )
        },
    ));

    // Parameter files: a small one, its counts first (every mutant is mostly header).
    let shape = wgpu_groth16::groth16::synthesis::synthesize(
        wgpu_groth16::groth16::circuits::FilecoinLike::new(4, 1).unwrap(),
    )
    .unwrap()
    .shape();
    let mut file = Vec::new();
    ProvingParameters::random_for_shape(&shape, 5)
        .write(&mut file)
        .unwrap();
    let path = common::scratch().join("hostile.params");
    failures.extend(hostile(
        "params",
        mutants(file, 5).take(inputs_per_target() / 4),
        |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            ProvingParameters::read_shape(&path)?;
            ProvingParameters::read_checked_once_with(
                &path,
                &CheckRecords::none(),
                &CpuSubgroupCheck,
            )
        },
    ));

    // A recorded constraint system's file (the matrices cache): cut short by a crash,
    // altered on disk.
    let circuit = wgpu_groth16::groth16::circuits::FilecoinLike::blank(6).unwrap();
    let system = wgpu_groth16::recorded::RecordedSystem::record(circuit).unwrap();
    let key = wgpu_groth16::recorded::RecordedKey::from_vk_bytes("hostile", b"vk");
    let recorded = common::scratch().join("hostile.recorded");
    system.write_to(&recorded, &key).unwrap();
    let file = std::fs::read(&recorded).unwrap();
    failures.extend(hostile("recorded", mutants(file, 6), |bytes: &[u8]| {
        std::fs::write(&recorded, bytes).unwrap();
        wgpu_groth16::recorded::RecordedSystem::read_from(&recorded, &key)
    }));

    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
