//! The files the command line writes, tried as a careless or hostile user would: one file
//! named two ways, pairs whose second file cannot be replaced, processes racing for the same
//! outputs, device nodes and links as outputs, signals. A failed command never destroys or
//! mismatches earlier files.

mod common;

use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::cli::*;

/// `setup` of the fixture's circuit into `params` and `vk`.
fn setup_into(params: &Path, vk: &Path) -> Command {
    let mut command = cli(&["setup", "--circuit", "filecoin-like", "--size", "6"]);
    command.args(["--params", path(params), "--vk", path(vk)]);
    command
}

/// Whether `params` begins with `vk`: a `.params` file starts with its verifying key.
fn params_match_vk(params: &Path, vk: &Path) -> bool {
    let (params, vk) = (fs::read(params).unwrap(), fs::read(vk).unwrap());
    params.starts_with(&vk)
}

#[test]
fn one_file_named_two_ways_is_refused_before_any_work_and_left_as_it_was() {
    let dir = scratch("named_twice");
    let (params, vk) = (dir.join("P.params"), dir.join("P.vk"));
    assert!(run(&mut setup_into(&params, &vk)).status.success());
    let before = fs::read(&params).unwrap();
    let fixture_before = fs::read(&setup().params).unwrap();
    let sub = dir.join("sub");
    fs::create_dir(&sub).unwrap();
    std::os::unix::fs::symlink(&params, dir.join("link")).unwrap();
    fs::hard_link(&params, dir.join("hard")).unwrap();
    let dotted = dir.join(".").join("P.params");
    let around = sub.join("..").join("P.params");
    for other in [&dotted, &around, &dir.join("link"), &dir.join("hard")] {
        let output = run(&mut setup_into(&params, other));
        assert_one_line_error(&output, "--params and --vk name the same file");
    }
    assert_eq!(fs::read(&params).unwrap(), before, "P.params kept");

    // prove: an output and the input, two outputs.
    let fixture = setup().params.as_path();
    let input = fixture.parent().unwrap().join(".").join("f6.params");
    let proof = dir.join("X");
    let (x_dotted, x_around) = (dir.join(".").join("X"), sub.join("..").join("X"));
    let cases = [
        (&input, vec![], "--params and --proof"),
        (
            &proof,
            vec!["--trace", path(&input)],
            "--params and --trace",
        ),
        (
            &proof,
            vec!["--inputs-out", path(&x_dotted)],
            "--proof and --inputs-out",
        ),
        (
            &proof,
            vec!["--trace", path(&x_around)],
            "--proof and --trace",
        ),
    ];
    for (output, extra, names) in cases {
        let proved = run(prove(&extra, output).env("BELLMAN_NO_GPU", "1"));
        assert_one_line_error(&proved, &format!("{names} name the same file"));
    }
    assert!(!proof.exists(), "nothing written");
    assert_eq!(
        fs::read(&setup().params).unwrap(),
        fixture_before,
        "--params kept"
    );
    assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
}

#[test]
fn an_output_that_is_a_directory_is_refused_before_the_work_and_the_pair_kept() {
    let dir = scratch("directory_output");
    let (params, vk) = (dir.join("P.params"), dir.join("P.vk"));
    assert!(run(&mut setup_into(&params, &vk)).status.success());
    let (params_before, vk_before) = (fs::read(&params).unwrap(), fs::read(&vk).unwrap());
    let taken = dir.join("taken");
    fs::create_dir(&taken).unwrap();
    // A setup of seconds: refused in milliseconds, the directory seen before the work.
    let mut slow = cli(&["setup", "--circuit", "filecoin-like", "--size", "14"]);
    slow.args(["--params", path(&params), "--vk", path(&taken)]);
    let (output, took) = run_bounded(&mut slow, FOUR_GIB, Duration::from_secs(60));
    assert_one_line_error(&output, "is a directory");
    assert!(took < Duration::from_secs(2), "refused after {took:?}");
    let missing = dir.join("no such directory").join("P.vk");
    let mut slow = cli(&["setup", "--circuit", "filecoin-like", "--size", "14"]);
    slow.args(["--params", path(&params), "--vk", path(&missing)]);
    let (output, took) = run_bounded(&mut slow, FOUR_GIB, Duration::from_secs(60));
    assert_one_line_error(&output, "cannot write");
    assert!(took < Duration::from_secs(2), "refused after {took:?}");
    assert_eq!(fs::read(&params).unwrap(), params_before);
    assert_eq!(fs::read(&vk).unwrap(), vk_before);

    let slash = format!("{}/", taken.display());
    let proved = run(prove(&[], Path::new(&slash)).env("BELLMAN_NO_GPU", "1"));
    assert_one_line_error(&proved, "names a directory, not a file");
    assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
}

/// Marks a file immutable (`chattr +i`) while it lives.
struct Immutable<'a>(&'a Path);

impl<'a> Immutable<'a> {
    fn set(path: &'a Path) -> Option<Self> {
        let done = Command::new("chattr").arg("+i").arg(path).output();
        if done.is_ok_and(|out| out.status.success()) {
            Some(Immutable(path))
        } else {
            eprintln!("skipping: cannot make {} immutable here", path.display());
            None
        }
    }
}

impl Drop for Immutable<'_> {
    fn drop(&mut self) {
        let _ = Command::new("chattr").arg("-i").arg(self.0).output();
    }
}

#[test]
fn a_pair_whose_second_file_cannot_be_replaced_keeps_both_previous_files() {
    let dir = scratch("immutable");
    let (params, vk) = (dir.join("P.params"), dir.join("P.vk"));
    assert!(run(&mut setup_into(&params, &vk)).status.success());
    let params_before = fs::read(&params).unwrap();
    {
        let Some(_vk_locked) = Immutable::set(&vk) else {
            return;
        };
        assert_one_line_error(&run(&mut setup_into(&params, &vk)), "cannot write");
    }
    assert_eq!(fs::read(&params).unwrap(), params_before, "the old .params");
    assert!(params_match_vk(&params, &vk));

    let (proof, inputs) = (dir.join("X.proof"), dir.join("X.inputs"));
    let with_inputs = ["--inputs-out", path(&inputs)];
    assert!(run(prove(&with_inputs, &proof).env("BELLMAN_NO_GPU", "1"))
        .status
        .success());
    let proof_before = fs::read(&proof).unwrap();
    {
        let Some(_inputs_locked) = Immutable::set(&inputs) else {
            return;
        };
        let output = run(prove(&with_inputs, &proof).env("BELLMAN_NO_GPU", "1"));
        assert_one_line_error(&output, "cannot write");
    }
    assert_eq!(fs::read(&proof).unwrap(), proof_before, "the old proof");
    assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
}

/// Starts `processes` commands made by `command(i)` at once and asserts that all succeed.
fn race(processes: usize, command: impl Fn(usize) -> Command) {
    let children: Vec<Child> = (0..processes)
        .map(|i| command(i).spawn().expect("the binary runs"))
        .collect();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{output:?}");
    }
}

#[test]
fn concurrent_provers_of_one_proof_and_inputs_leave_one_statement() {
    let dir = scratch("racing_provers");
    let (proof, inputs) = (dir.join("r.proof"), dir.join("r.inputs"));
    for round in 0..40 {
        race(4, |i| {
            let mut command = cli(&["prove", "--params", path(&setup().params)]);
            command.args(["--circuit", "filecoin-like", "--size", "6"]);
            // A statement per process: each seed gives other public inputs.
            command.args(["--seed", &(round * 4 + i).to_string()]);
            command.args(["--proof", path(&proof), "--inputs-out", path(&inputs)]);
            command
                .env("BELLMAN_NO_GPU", "1")
                .stdout(std::process::Stdio::null());
            command
        });
        let verified = run(&mut verify(&proof, path(&inputs)));
        assert_eq!(
            verified.status.code(),
            Some(0),
            "round {round}: the proof is not for the inputs beside it: {verified:?}"
        );
    }
    assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
}

#[test]
fn concurrent_setups_of_one_pair_leave_params_and_vk_of_one_setup() {
    let dir = scratch("racing_setups");
    let (params, vk) = (dir.join("s.params"), dir.join("s.vk"));
    for round in 0..40 {
        race(4, |_| {
            let mut command = setup_into(&params, &vk);
            command.stdout(std::process::Stdio::null());
            command
        });
        assert!(
            params_match_vk(&params, &vk),
            "round {round}: the .params and the .vk of two setups"
        );
    }
    assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
}

/// Makes a character device like `/dev/null` (1, 3) at `path`, where this user may.
fn null_device(path: &Path) -> bool {
    let made = Command::new("mknod")
        .arg(path)
        .args(["c", "1", "3"])
        .output();
    if made.is_ok_and(|out| out.status.success()) {
        true
    } else {
        eprintln!("skipping the device node: mknod is not permitted here");
        false
    }
}

#[test]
fn a_device_fifo_or_symlink_output_is_written_through_not_replaced() {
    let dir = scratch("special_outputs");
    let (null, inputs) = (dir.join("null"), dir.join("f6.inputs"));
    if null_device(&null) {
        let proved = run(prove(&["--inputs-out", path(&inputs)], &null).env("BELLMAN_NO_GPU", "1"));
        assert!(proved.status.success(), "{proved:?}");
        let kind = fs::symlink_metadata(&null).unwrap().file_type();
        assert!(kind.is_char_device(), "the device was replaced: {kind:?}");
        assert_eq!(fs::read_to_string(&inputs).unwrap().lines().count(), 4);
    }

    let (target, link) = (dir.join("target.proof"), dir.join("link.proof"));
    fs::write(&target, "previous").unwrap();
    std::os::unix::fs::symlink("target.proof", &link).unwrap();
    let proved = run(prove(&[], &link).env("BELLMAN_NO_GPU", "1"));
    assert!(proved.status.success(), "{proved:?}");
    assert!(
        fs::symlink_metadata(&link).unwrap().is_symlink(),
        "the link was replaced"
    );
    assert_eq!(
        fs::read(&target).unwrap().len(),
        192,
        "the link's target holds the proof"
    );

    let fifo = dir.join("proof.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || fs::read(fifo).unwrap())
    };
    let proved = run(prove(&[], &fifo).env("BELLMAN_NO_GPU", "1"));
    assert!(proved.status.success(), "{proved:?}");
    assert_eq!(
        reader.join().unwrap().len(),
        192,
        "the proof went through the FIFO"
    );
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
}

/// Starts a setup of a few seconds into `dir` and waits until its temporaries exist.
fn setup_until_temporaries_exist(dir: &Path) -> Child {
    let mut command = cli(&["setup", "--circuit", "filecoin-like", "--size", "12"]);
    command.args(["--params", path(&dir.join("s.params"))]);
    command.args(["--vk", path(&dir.join("s.vk"))]);
    let mut child = command.stdout(std::process::Stdio::null()).spawn().unwrap();
    let start = Instant::now();
    while leftovers(dir).len() < 2 {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the setup ended ({status}) before its temporaries were seen");
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no temporaries");
        std::thread::sleep(Duration::from_millis(2));
    }
    child
}

fn signal(child: &Child, signal: i32) {
    // SAFETY: kill on the pid of a child this test owns and has not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
}

#[test]
fn sigint_removes_the_temporaries_and_the_next_run_sweeps_those_of_a_killed_process() {
    use std::os::unix::process::ExitStatusExt;
    let dir = scratch("signals");
    let mut child = setup_until_temporaries_exist(&dir);
    signal(&child, libc::SIGINT);
    let status = child.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(libc::SIGINT),
        "dies of the signal: {status}"
    );
    assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 0, "and writes nothing");

    let mut child = setup_until_temporaries_exist(&dir);
    signal(&child, libc::SIGKILL);
    child.wait().unwrap();
    let stale = leftovers(&dir);
    assert_eq!(stale.len(), 2, "SIGKILL cannot be caught: {stale:?}");
    let next = run(&mut setup_into(&dir.join("s.params"), &dir.join("s.vk")));
    assert!(next.status.success(), "{next:?}");
    assert!(
        leftovers(&dir).is_empty(),
        "not swept: {:?}",
        leftovers(&dir)
    );
}
