//! Recorded constraint systems on disk: what is written reads back equal and proves as bellperson
//! does; a file that is truncated, damaged, of another format or for another key is an
//! error, never a panic; a write is whole or leaves the earlier file; `load_or_record`
//! records once, then loads; a writer killed part way or stopped by a full disk leaves no half
//! file.

mod common;

use std::cell::Cell;
use std::fs;
use std::path::Path;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::Duration;

use bellperson::groth16::{create_proof_batch, generate_random_parameters};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Scalar};
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use wgpu_groth16::groth16::circuits::{BitsHeavy, FilecoinLike, ManyInputs, Sha256Preimage};
use wgpu_groth16::groth16::{Prover, ProverEngine};
use wgpu_groth16::recorded::{Origin, RecordedKey, RecordedSystem};
use wgpu_groth16::Error;

use common::scratch;

/// An input allocated after a constraint over aux variables (as Filecoin's `inputize`), and
/// a coefficient other than ±1.
#[derive(Clone)]
struct LateInput {
    x: Option<Scalar>,
}

impl Circuit<Scalar> for LateInput {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let missing = || SynthesisError::AssignmentMissing;
        let square = self.x.map(|x| x.square());
        let x = cs.alloc(|| "x", || self.x.ok_or_else(missing))?;
        let y = cs.alloc(|| "x^2", || square.ok_or_else(missing))?;
        cs.enforce(|| "x * x = y", |lc| lc + x, |lc| lc + x, |lc| lc + y);
        let input = cs.alloc_input(|| "y in", || square.ok_or_else(missing))?;
        let three = Scalar::from(3u64);
        cs.enforce(
            || "3 y in = 3 y",
            |lc| lc + (three, input),
            |lc| lc + CS::one(),
            |lc| lc + (three, y),
        );
        Ok(())
    }
}

fn key(name: &str) -> RecordedKey {
    RecordedKey::from_vk_bytes(name, b"a verifying key")
}

fn written(dir: &Path, matrices: &RecordedSystem, key: &RecordedKey) -> Vec<u8> {
    let path = key.path_in(dir);
    matrices.write_to(&path, key).expect("written");
    fs::read(path).unwrap()
}

/// `bytes` at the key's path in `dir`, then read back.
fn read_bytes(dir: &Path, key: &RecordedKey, bytes: &[u8]) -> Result<RecordedSystem, Error> {
    let path = key.path_in(dir);
    fs::write(&path, bytes).unwrap();
    RecordedSystem::read_from(&path, key)
}

fn refusal(result: Result<RecordedSystem, Error>) -> String {
    match result {
        Err(Error::RecordedFile { reason, .. }) => reason,
        Err(other) => panic!("another error: {other}"),
        Ok(_) => panic!("accepted"),
    }
}

/// The file's trailing digest made right again after an edit.
fn redigest(bytes: &mut [u8]) {
    let body = bytes.len() - 32;
    let digest = blake3::hash(&bytes[..body]);
    bytes[body..].copy_from_slice(digest.as_bytes());
}

fn small_system() -> RecordedSystem {
    RecordedSystem::record(FilecoinLike::blank(8).unwrap()).unwrap()
}

#[test]
fn systems_read_back_equal_to_those_written() {
    let dir = scratch("round-trip");
    let circuits: Vec<(&str, RecordedSystem)> = vec![
        (
            "sha256",
            RecordedSystem::record(Sha256Preimage::blank(64)).unwrap(),
        ),
        (
            "filecoin-like",
            RecordedSystem::record(FilecoinLike::blank(12).unwrap()).unwrap(),
        ),
        (
            "many-inputs",
            RecordedSystem::record(ManyInputs::blank(70)).unwrap(),
        ),
        (
            "bits-heavy",
            RecordedSystem::record(BitsHeavy::blank(300)).unwrap(),
        ),
        (
            "late-input",
            RecordedSystem::record(LateInput { x: None }).unwrap(),
        ),
    ];
    for (name, matrices) in circuits {
        let key = key(name);
        let path = key.path_in(&dir);
        matrices.write_to(&path, &key).expect("written");
        let read = RecordedSystem::read_from(&path, &key).expect("read");
        assert!(read == matrices, "{name}: read back differently");
    }
}

/// A read runs on threads of its own: with every thread of the global pool held, it still
/// finishes. On the global pool each of its steps queued behind whatever ran there (beside
/// a parameter file's decode, an 8.5 GB system took 22 s).
#[test]
fn a_read_does_not_wait_for_the_global_pool() {
    let dir = scratch("busy-pool");
    let key = key("busy pool");
    let path = key.path_in(&dir);
    // Large enough for reads in several steps and checks split across threads.
    let system = large_system();
    system.write_to(&path, &key).expect("written");
    let held = Arc::new((Mutex::new(true), Condvar::new()));
    let (started, all_started) = mpsc::channel();
    for _ in 0..rayon::current_num_threads() {
        let (held, started) = (held.clone(), started.clone());
        rayon::spawn(move || {
            started.send(()).unwrap();
            let (lock, released) = &*held;
            let mut holding = lock.lock().unwrap();
            while *holding {
                holding = released.wait(holding).unwrap();
            }
        });
    }
    for _ in 0..rayon::current_num_threads() {
        all_started.recv().unwrap();
    }
    let (done, read) = mpsc::channel();
    // The receiver outlives the reader unless the test already failed.
    let reader = std::thread::spawn(move || {
        let _ = done.send(RecordedSystem::read_from(&path, &key));
    });
    let outcome = read.recv_timeout(Duration::from_secs(60));
    *held.0.lock().unwrap() = false;
    held.1.notify_all();
    reader.join().unwrap();
    let read = outcome.expect("the read waited for the global pool's threads");
    assert!(read.expect("read") == system, "read back differently");
}

#[test]
fn proofs_through_loaded_systems_equal_bellperson() {
    let dir = scratch("proofs");
    let blank = Sha256Preimage::blank(32);
    let params = generate_random_parameters::<Bls12, _, _>(
        blank.clone(),
        &mut ChaCha20Rng::seed_from_u64(5),
    )
    .unwrap();
    let key = RecordedKey::new("sha256 of 32 bytes", &params.vk).unwrap();
    let mut vk = Vec::new();
    params.vk.write(&mut vk).unwrap();
    assert_eq!(key, RecordedKey::from_vk_bytes("sha256 of 32 bytes", &vk));
    let path = key.path_in(&dir);
    RecordedSystem::record(blank)
        .unwrap()
        .write_to(&path, &key)
        .unwrap();
    let matrices = Arc::new(RecordedSystem::read_from(&path, &key).unwrap());

    let circuits: Vec<Sha256Preimage> = (0..2u8).map(|i| Sha256Preimage::new(&[i; 32])).collect();
    let mut rng = ChaCha20Rng::seed_from_u64(6);
    let rs: Vec<Scalar> = (0..2).map(|_| Scalar::random(&mut rng)).collect();
    let ss: Vec<Scalar> = (0..2).map(|_| Scalar::random(&mut rng)).collect();
    let expected = create_proof_batch(circuits.clone(), &params, rs.clone(), ss.clone()).unwrap();
    let prover = Prover::with_engine(&params, Arc::new(ProverEngine::cpu())).unwrap();
    let proofs = prover
        .prove_batch_recorded(circuits, &matrices, &rs, &ss)
        .unwrap();
    for (ours, theirs) in proofs.iter().zip(&expected) {
        assert_eq!(common::proof_bytes(ours), common::proof_bytes(theirs));
    }
}

#[test]
fn a_truncated_or_extended_file_is_refused() {
    let dir = scratch("truncated");
    let key = key("truncated");
    let bytes = written(&dir, &small_system(), &key);
    let len = bytes.len();
    for cut in [
        0,
        7,
        100,
        127,
        128,
        135,
        1000,
        len / 2,
        len - 33,
        len - 32,
        len - 1,
    ] {
        let why = refusal(read_bytes(&dir, &key, &bytes[..cut]));
        assert!(why.contains("truncated"), "cut at {cut}: {why}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    let why = refusal(read_bytes(&dir, &key, &longer));
    assert!(why.contains("trailing bytes"), "{why}");
}

#[test]
fn a_flipped_byte_anywhere_is_refused() {
    let dir = scratch("flipped");
    let key = key("flipped");
    let bytes = written(&dir, &small_system(), &key);
    // Every header byte, then a spread of the body's.
    let body: Vec<usize> = (128..bytes.len()).step_by(997).collect();
    for at in (0..128).chain(body).chain([bytes.len() - 1]) {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x40;
        refusal(read_bytes(&dir, &key, &damaged));
    }
    // A body byte: caught by the digest.
    let mut damaged = bytes.clone();
    damaged[bytes.len() / 2] ^= 1;
    let why = refusal(read_bytes(&dir, &key, &damaged));
    assert!(why.contains("does not match its digest"), "{why}");
}

#[test]
fn another_magic_version_or_key_is_refused() {
    let dir = scratch("other");
    let key = key("circuit one");
    let bytes = written(&dir, &small_system(), &key);
    let mut other = bytes.clone();
    other[..8].copy_from_slice(b"NOTMTRX!");
    assert!(refusal(read_bytes(&dir, &key, &other)).contains("wrong magic"));
    let mut other = bytes.clone();
    other[8] = 3;
    redigest(&mut other);
    assert!(refusal(read_bytes(&dir, &key, &other)).contains("format version 3"));

    // Another circuit, or the same circuit with other parameters.
    let path = key.path_in(&dir);
    fs::write(&path, &bytes).unwrap();
    for wrong in [
        RecordedKey::from_vk_bytes("circuit two", b"a verifying key"),
        RecordedKey::from_vk_bytes("circuit one", b"another verifying key"),
    ] {
        let why = refusal(RecordedSystem::read_from(&path, &wrong));
        assert!(why.contains("another circuit or parameters"), "{why}");
        assert!(why.contains("circuit one"), "{why}");
    }
    let why = refusal(RecordedSystem::read_from(&dir, &key));
    assert!(why.contains("not a regular file"), "{why}");
}

/// Contents that the digest vouches for but that cannot be matrices: each index is checked.
#[test]
fn consistent_digest_over_impossible_contents_is_refused() {
    let dir = scratch("impossible");
    let key = key("impossible");
    let matrices = RecordedSystem::record(LateInput { x: None }).unwrap();
    let bytes = written(&dir, &matrices, &key);
    let len = bytes.len();
    // The file ends with C's coefficients (u32 each), then the digest: the last
    // coefficient names a value past the table.
    let mut other = bytes.clone();
    other[len - 36..len - 32].copy_from_slice(&1000u32.to_le_bytes());
    redigest(&mut other);
    let why = refusal(read_bytes(&dir, &key, &other));
    assert!(
        why.contains("matrix C") && why.contains("coefficient value 1000"),
        "{why}"
    );
    // Before them, C's columns: an aux index past the aux variables.
    let entries = u64::from_le_bytes(bytes[48 + 7 * 8..48 + 8 * 8].try_into().unwrap()) as usize;
    let last_column = len - 32 - 4 * entries - 4;
    let mut other = bytes.clone();
    other[last_column..last_column + 4].copy_from_slice(&(0x8000_0000u32 | 77).to_le_bytes());
    redigest(&mut other);
    let why = refusal(read_bytes(&dir, &key, &other));
    assert!(
        why.contains("matrix C") && why.contains("names variable"),
        "{why}"
    );
    // C's last row start is its entry count: one less leaves an entry out.
    let last_start = last_column + 4 - 4 * entries - 8;
    let mut other = bytes.clone();
    other[last_start..last_start + 8].copy_from_slice(&(entries as u64 - 1).to_le_bytes());
    redigest(&mut other);
    let why = refusal(read_bytes(&dir, &key, &other));
    assert!(why.contains("row starts"), "{why}");
    // Counts too large for any file.
    let mut other = bytes.clone();
    other[56..64].copy_from_slice(&u64::MAX.to_le_bytes());
    redigest(&mut other);
    refusal(read_bytes(&dir, &key, &other));
}

#[test]
fn a_failed_write_creates_nothing_and_a_rewrite_replaces_the_whole_file() {
    let dir = scratch("writes");
    let key = key("writes");
    // A parent that is a file: refused, nothing made.
    let blocker = dir.join("a-file");
    fs::write(&blocker, b"not a folder").unwrap();
    let err = small_system()
        .write_to(&blocker.join("m.matrices"), &key)
        .unwrap_err();
    assert!(matches!(err, Error::RecordedFile { .. }), "{err}");
    assert_eq!(fs::read(&blocker).unwrap(), b"not a folder");

    // Larger matrices, then smaller ones over them: the smaller read back, no leftovers.
    let path = key.path_in(&dir);
    let large = RecordedSystem::record(FilecoinLike::blank(11).unwrap()).unwrap();
    large.write_to(&path, &key).unwrap();
    let small = small_system();
    small.write_to(&path, &key).unwrap();
    assert!(RecordedSystem::read_from(&path, &key).unwrap() == small);
    let expected = path.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(names_in(&dir), ["a-file".to_string(), expected]);
}

#[test]
fn load_or_record_records_once_then_loads_and_replaces_a_damaged_file() {
    let dir = scratch("load-or-record");
    let key = key("load or record");
    let calls = Cell::new(0);
    let circuit = || {
        calls.set(calls.get() + 1);
        Ok(FilecoinLike::blank(9).unwrap())
    };
    let (first, origin) = RecordedSystem::load_or_record(Some(&dir), &key, circuit).unwrap();
    let path = key.path_in(&dir);
    assert_eq!(origin, Origin::Recorded(Some(path.clone())));
    let (second, origin) = RecordedSystem::load_or_record(Some(&dir), &key, circuit).unwrap();
    assert_eq!(origin, Origin::Loaded(path.clone()));
    assert_eq!(calls.get(), 1, "the second call recorded again");
    assert!(first == second);

    // A damaged file is recorded again and replaced.
    let mut bytes = fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    fs::write(&path, &bytes).unwrap();
    let (third, origin) = RecordedSystem::load_or_record(Some(&dir), &key, circuit).unwrap();
    assert_eq!(origin, Origin::Recorded(Some(path.clone())));
    assert_eq!(calls.get(), 2);
    assert!(third == first);
    assert!(RecordedSystem::read_from(&path, &key).unwrap() == first);

    // A folder that cannot be made: recorded all the same, not written.
    let blocker = dir.join("a-file");
    fs::write(&blocker, b"").unwrap();
    let (fourth, origin) =
        RecordedSystem::load_or_record(Some(&blocker.join("sub")), &key, circuit).unwrap();
    assert_eq!(origin, Origin::Recorded(None));
    assert!(fourth == first);
}

/// What the child processes of the two tests below write: a system large enough that its
/// write takes a while (29 MB).
fn large_system() -> RecordedSystem {
    RecordedSystem::record(FilecoinLike::blank(19).unwrap()).unwrap()
}

const CHILD_DIR: &str = "RECORDED_STORE_CHILD_DIR";
const CHILD_MODE: &str = "RECORDED_STORE_CHILD_MODE";

/// This test binary run again as a child process doing `mode` in `dir`
/// ([`child_process_of_the_tests_below`]).
fn child(dir: &Path, mode: &str) -> std::process::Command {
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "child_process_of_the_tests_below", "--ignored"])
        .args(["--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir)
        .env(CHILD_MODE, mode);
    command
}

/// A child process of the tests below, and nothing when run otherwise: with mode `forever`,
/// writes [`large_system`] to its file again and again until it is killed; with `full`,
/// writes it once where no file may grow past 1 MiB (`RLIMIT_FSIZE`: the write fails part
/// way with EFBIG, as on a full disk with ENOSPC, with no root needed to fill a disk).
#[test]
#[ignore = "run by the tests below as their child process"]
fn child_process_of_the_tests_below() {
    let (Some(dir), Some(mode)) = (std::env::var_os(CHILD_DIR), std::env::var(CHILD_MODE).ok())
    else {
        return;
    };
    let dir = Path::new(&dir);
    let key = key("killed or full");
    let system = large_system();
    match mode.as_str() {
        "forever" => loop {
            system.write_to(&key.path_in(dir), &key).unwrap();
        },
        "full" => {
            // SAFETY: plain libc calls on this process's own limits and signal mask; past
            // the limit, a write fails with EFBIG instead of raising SIGXFSZ.
            unsafe {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                let limit = libc::rlimit {
                    rlim_cur: 1 << 20,
                    rlim_max: 1 << 20,
                };
                assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
            }
            let err = system.write_to(&key.path_in(dir), &key).unwrap_err();
            assert!(matches!(err, Error::RecordedFile { .. }), "{err}");
            assert!(err.to_string().contains("cannot write it"), "{err}");
            // What a job does: the system it recorded, with a warning that it is not kept.
            let (proved_with, origin) = RecordedSystem::load_or_record(Some(dir), &key, || {
                Ok(FilecoinLike::blank(19).unwrap())
            })
            .unwrap();
            assert_eq!(origin, Origin::Recorded(None));
            assert!(proved_with == system);
        }
        other => panic!("unknown mode {other}"),
    }
}

/// The names in `dir`.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `kill -9` of a process in the middle of writing a recorded system, then a restart: the
/// killed write's temporary is never read as the system (the file under the system's name
/// is absent or whole), and the next process's write sweeps it.
#[test]
fn a_writer_killed_mid_write_leaves_no_half_file_and_the_next_one_sweeps_its_temporary() {
    let dir = scratch("killed-mid-write");
    let key = key("killed or full");
    let path = key.path_in(&dir);
    let is_temporary = |name: &String| name.ends_with(".tmp");
    let mut killed_mid_write = 0;
    for _ in 0..10 {
        let mut writer = child(&dir, "forever").spawn().unwrap();
        // Killed once a write's temporary has bytes in it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !fs::read_dir(&dir).unwrap().any(|e| {
            let e = e.unwrap();
            is_temporary(&e.file_name().to_string_lossy().into_owned())
                && e.metadata().is_ok_and(|m| m.len() > 0)
        }) {
            assert!(std::time::Instant::now() < deadline, "no write began");
            assert!(writer.try_wait().unwrap().is_none(), "the writer ended");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        writer.kill().unwrap();
        writer.wait().unwrap();
        if names_in(&dir).iter().any(is_temporary) {
            killed_mid_write += 1;
        }
        if path.exists() {
            assert!(RecordedSystem::read_from(&path, &key).unwrap() == large_system());
        }
        if killed_mid_write > 0 && path.exists() {
            break;
        }
    }
    assert!(killed_mid_write > 0, "no kill landed in a write");
    let (loaded, _) =
        RecordedSystem::load_or_record(Some(&dir), &key, || Ok(FilecoinLike::blank(19).unwrap()))
            .unwrap();
    assert!(loaded == large_system());
    loaded.write_to(&path, &key).unwrap();
    let expected = path.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(names_in(&dir), [expected]);
}

/// A write that fails part way (the disk full) leaves nothing behind, and the job that
/// recorded the system goes on with it.
#[test]
fn a_full_disk_fails_the_write_leaves_nothing_and_keeps_the_system() {
    let dir = scratch("full-disk");
    let status = child(&dir, "full").status().unwrap();
    assert!(status.success(), "the child failed: {status}");
    assert!(names_in(&dir).is_empty(), "{:?}", names_in(&dir));
}
