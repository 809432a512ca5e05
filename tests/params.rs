//! `.params` reading and writing against bellperson 0.27's own `Parameters::read`/`write`, on
//! parameters generated for a small circuit: equal values, equal bytes, and the same verdict on
//! every corrupted file (truncated, bad counts, bad points), with errors that name the spot.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use bellperson::groth16::{generate_random_parameters, Parameters};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Fp, Fp2, G1Affine, G2Affine, Scalar};
use ff::Field;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;
use wgpu_groth16::groth16::circuits::SizeBounds;
use wgpu_groth16::groth16::params::{
    CheckRecords, Checked, ParamsShape, PointCheck, ProvingParameters, PublishedDigests,
    PUBLISHED_DIGEST_BYTES,
};
use wgpu_groth16::{Error, Result};

const G1: usize = 96;
const G2: usize = 192;
const MODES: [PointCheck; 2] = [PointCheck::Checked, PointCheck::Unchecked];

// Records the largest allocation each thread asks for, so a test can show that a huge count
// is refused before anything is allocated for it.
struct LargestAllocation;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = LARGEST.try_with(|m| m.set(m.get().max(size)));
}

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for LargestAllocation {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: LargestAllocation = LargestAllocation;

/// x^3 + x + 5 = out, with x^2 and out public: two public inputs, two auxiliary variables.
struct Cubic {
    x: Option<Scalar>,
}

impl Circuit<Scalar> for Cubic {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let missing = || SynthesisError::AssignmentMissing;
        let x_val = self.x;
        let x2_val = x_val.map(|x| x.square());
        let x3_val = x2_val.zip(x_val).map(|(x2, x)| x2 * x);
        let out_val = x3_val.zip(x_val).map(|(x3, x)| x3 + x + Scalar::from(5));

        let x = cs.alloc(|| "x", || x_val.ok_or_else(missing))?;
        let x2 = cs.alloc_input(|| "x^2", || x2_val.ok_or_else(missing))?;
        let x3 = cs.alloc(|| "x^3", || x3_val.ok_or_else(missing))?;
        let out = cs.alloc_input(|| "out", || out_val.ok_or_else(missing))?;
        cs.enforce(|| "x * x = x^2", |lc| lc + x, |lc| lc + x, |lc| lc + x2);
        cs.enforce(|| "x^2 * x = x^3", |lc| lc + x2, |lc| lc + x, |lc| lc + x3);
        cs.enforce(
            || "(x^3 + x + 5) * 1 = out",
            |lc| lc + x3 + x + (Scalar::from(5), CS::one()),
            |lc| lc + CS::one(),
            |lc| lc + out,
        );
        Ok(())
    }
}

/// The test parameters and their bytes as bellperson writes them.
fn fixture() -> &'static (Parameters<Bls12>, Vec<u8>) {
    static FIXTURE: OnceLock<(Parameters<Bls12>, Vec<u8>)> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let params = generate_random_parameters::<Bls12, _, _>(
            Cubic { x: None },
            &mut ChaCha20Rng::seed_from_u64(7),
        )
        .unwrap();
        let mut bytes = Vec::new();
        params.write(&mut bytes).unwrap();
        (params, bytes)
    })
}

/// A part of the file, found independently of the reader: its bytes are `start..end`.
#[derive(Clone, Copy, Debug)]
struct Part {
    section: &'static str,
    kind: Kind,
    start: usize,
    end: usize,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// One point of the verifying key.
    Single(usize),
    Count,
    /// The points after a count, each of this size.
    Points(usize),
}

fn layout(p: &Parameters<Bls12>) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut pos = 0;
    let mut push = |section, kind, len| {
        parts.push(Part {
            section,
            kind,
            start: pos,
            end: pos + len,
        });
        pos += len;
    };
    for (section, size) in [
        ("vk.alpha_g1", G1),
        ("vk.beta_g1", G1),
        ("vk.beta_g2", G2),
        ("vk.gamma_g2", G2),
        ("vk.delta_g1", G1),
        ("vk.delta_g2", G2),
    ] {
        push(section, Kind::Single(size), size);
    }
    for (section, count, size) in [
        ("vk.ic", p.vk.ic.len(), G1),
        ("h", p.h.len(), G1),
        ("l", p.l.len(), G1),
        ("a", p.a.len(), G1),
        ("b_g1", p.b_g1.len(), G1),
        ("b_g2", p.b_g2.len(), G2),
    ] {
        push(section, Kind::Count, 4);
        push(section, Kind::Points(size), count * size);
    }
    parts
}

/// Every point record of the file: section, index in the section, byte range.
fn records(p: &Parameters<Bls12>) -> Vec<(&'static str, usize, std::ops::Range<usize>)> {
    let mut records = Vec::new();
    for part in layout(p) {
        match part.kind {
            Kind::Single(_) => records.push((part.section, 0, part.start..part.end)),
            Kind::Points(size) => {
                for (index, start) in (part.start..part.end).step_by(size).enumerate() {
                    records.push((part.section, index, start..start + size));
                }
            }
            Kind::Count => {}
        }
    }
    records
}

/// A file in the temp directory, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(bytes: &[u8]) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "wgpu-groth16-params-test-{}-{}.params",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&path, bytes).unwrap();
        TempFile(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn read_file(bytes: &[u8], check: PointCheck) -> Result<ProvingParameters> {
    ProvingParameters::read(TempFile::new(bytes).path(), check)
}

fn assert_equal(ours: &ProvingParameters, theirs: &Parameters<Bls12>) {
    assert_eq!(ours.vk, theirs.vk);
    assert_eq!(ours.h, theirs.h);
    assert_eq!(ours.l, theirs.l);
    assert_eq!(ours.a, theirs.a);
    assert_eq!(ours.b_g1, theirs.b_g1);
    assert_eq!(ours.b_g2, theirs.b_g2);
}

fn checked(mode: PointCheck) -> bool {
    mode == PointCheck::Checked
}

/// Reads `bytes` with us and with bellperson in `mode`: both accept with equal values or both
/// refuse. Returns our result.
fn read_like_bellperson(bytes: &[u8], mode: PointCheck) -> Result<ProvingParameters> {
    let ours = ProvingParameters::from_bytes(bytes, mode);
    let theirs = Parameters::<Bls12>::read(bytes, checked(mode));
    match (&ours, &theirs) {
        (Ok(ours), Ok(theirs)) => assert_equal(ours, theirs),
        (Err(_), Err(_)) => {}
        (ours, theirs) => panic!(
            "{mode:?}: we say {ours:?}, bellperson says {:?}",
            theirs.as_ref().map(|_| "Ok")
        ),
    }
    ours
}

fn assert_invalid_point(
    result: Result<ProvingParameters>,
    want_section: &str,
    want_index: usize,
) -> String {
    match result {
        Err(Error::ParamsInvalidPoint {
            section,
            index,
            reason,
        }) if section == want_section && index == want_index => reason,
        other => panic!("expected invalid point {want_section}[{want_index}], got {other:?}"),
    }
}

fn replace(bytes: &[u8], at: usize, with: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out[at..at + with.len()].copy_from_slice(with);
    out
}

fn record_of(section: &str, index: usize) -> std::ops::Range<usize> {
    let (_, _, range) = records(&fixture().0)
        .into_iter()
        .find(|(s, i, _)| *s == section && *i == index)
        .unwrap();
    range
}

/// An uncompressed G1 encoding of a point on the curve outside the prime-order subgroup.
fn g1_outside_subgroup() -> Vec<u8> {
    (1u64..)
        .find_map(|x| {
            let x = Fp::from(x);
            let y = Option::<Fp>::from((x.square() * x + Fp::from(4)).sqrt())?;
            let point = G1Affine::from_raw_unchecked(x, y, false);
            (!bool::from(point.is_torsion_free()))
                .then(|| [x.to_bytes_be(), y.to_bytes_be()].concat())
        })
        .unwrap()
}

/// An uncompressed G2 encoding (c1 before c0) of a point on the twist outside the subgroup.
fn g2_outside_subgroup() -> Vec<u8> {
    let b = Fp2::new(Fp::from(4), Fp::from(4));
    (1u64..)
        .find_map(|k| {
            let x = Fp2::new(Fp::from(k), Fp::ONE);
            let y = Option::<Fp2>::from((x.square() * x + b).sqrt())?;
            let point = G2Affine::from_raw_unchecked(x, y, false);
            (!bool::from(point.is_torsion_free())).then(|| {
                [x.c1(), x.c0(), y.c1(), y.c0()]
                    .iter()
                    .flat_map(|c| c.to_bytes_be())
                    .collect()
            })
        })
        .unwrap()
}

fn identity(size: usize) -> Vec<u8> {
    let mut bytes = vec![0; size];
    bytes[0] = 0x40;
    bytes
}

#[test]
fn read_equals_bellperson_read_in_both_modes() {
    let (params, bytes) = fixture();
    let file = TempFile::new(bytes);
    for mode in MODES {
        let ours = ProvingParameters::read(file.path(), mode).unwrap();
        assert_equal(&ours, &Parameters::read(&bytes[..], checked(mode)).unwrap());
        assert_equal(&ours, params);
        assert!(!ours.b_g2.is_empty(), "the fixture exercises every section");
    }
}

#[test]
fn write_equals_bellperson_write_byte_for_byte() {
    let (params, bytes) = fixture();
    for ours in [
        ProvingParameters::from(params),
        ProvingParameters::from_bytes(bytes, PointCheck::Unchecked).unwrap(),
    ] {
        let mut written = Vec::new();
        ours.write(&mut written).unwrap();
        assert!(written == *bytes, "written bytes differ from bellperson's");
    }
}

#[test]
fn conversions_from_and_to_bellperson_share_the_point_vectors() {
    let (params, _) = fixture();
    let by_ref = ProvingParameters::from(params);
    let by_value = ProvingParameters::from(params.clone());
    for ours in [&by_ref, &by_value] {
        assert!(Arc::ptr_eq(&ours.h, &params.h) && Arc::ptr_eq(&ours.l, &params.l));
        assert!(Arc::ptr_eq(&ours.a, &params.a) && Arc::ptr_eq(&ours.b_g1, &params.b_g1));
        assert!(Arc::ptr_eq(&ours.b_g2, &params.b_g2));
        let back = ours.to_bellperson();
        assert!(back == *params);
        assert!(Arc::ptr_eq(&back.h, &params.h) && Arc::ptr_eq(&back.b_g2, &params.b_g2));
    }
}

#[test]
fn truncation_at_every_offset_names_the_part_that_is_cut() {
    let (params, bytes) = fixture();
    let parts = layout(params);
    assert_eq!(parts.last().unwrap().end, bytes.len());
    for cut in 0..bytes.len() {
        let part = parts
            .iter()
            .find(|p| p.start <= cut && cut < p.end)
            .unwrap();
        for mode in MODES {
            match ProvingParameters::from_bytes(&bytes[..cut], mode) {
                Err(Error::ParamsTruncated {
                    section,
                    offset,
                    needed,
                    available,
                }) => assert_eq!(
                    (section, offset, needed, available),
                    (
                        part.section,
                        part.start as u64,
                        (part.end - part.start) as u64,
                        cut as u64
                    ),
                    "cut at {cut}"
                ),
                other => panic!("cut at {cut} ({part:?}): {other:?}"),
            }
        }
        assert!(Parameters::<Bls12>::read(&bytes[..cut], false).is_err());
    }
}

#[test]
fn read_reports_truncated_files_including_empty_ones() {
    let (params, bytes) = fixture();
    // Inside the vk, inside each count, inside the first point of each section, and empty.
    let mut cuts = vec![0, 50, 500];
    for part in layout(params) {
        match part.kind {
            Kind::Count => cuts.push(part.start + 2),
            Kind::Points(size) if part.end > part.start => cuts.push(part.start + size / 2),
            _ => {}
        }
    }
    for cut in cuts {
        let file = TempFile::new(&bytes[..cut]);
        let err = ProvingParameters::read(file.path(), PointCheck::Unchecked).unwrap_err();
        assert!(
            matches!(err, Error::ParamsTruncated { available, .. } if available == cut as u64),
            "cut at {cut}: {err}"
        );
    }
}

#[test]
fn huge_count_is_refused_before_allocating() {
    let (params, bytes) = fixture();
    for part in layout(params).iter().filter(|p| p.kind == Kind::Count) {
        let corrupt = replace(bytes, part.start, &u32::MAX.to_be_bytes());
        let size = if part.section == "b_g2" { G2 } else { G1 };
        let file = TempFile::new(&corrupt);
        LARGEST.with(|m| m.set(0));
        let result = ProvingParameters::read(file.path(), PointCheck::Unchecked);
        let largest = LARGEST.with(Cell::get);
        match result {
            Err(Error::ParamsTruncated {
                section,
                offset,
                needed,
                available,
            }) => assert_eq!(
                (section, offset, needed, available),
                (
                    part.section,
                    part.end as u64,
                    u64::from(u32::MAX) * size as u64,
                    bytes.len() as u64
                )
            ),
            other => panic!("count of {} set to 2^32-1: {other:?}", part.section),
        }
        assert!(largest < bytes.len(), "allocated {largest} bytes");
    }
}

#[test]
fn trailing_bytes_are_refused_although_bellperson_ignores_them() {
    let (params, bytes) = fixture();
    for extra in [vec![0u8], params.h[0].to_uncompressed().as_ref().to_vec()] {
        let longer = [bytes.as_slice(), &extra].concat();
        for mode in MODES {
            let err = read_file(&longer, mode).unwrap_err();
            assert!(
                matches!(&err, Error::ParamsFormat(m) if m.contains("trailing")),
                "{err}"
            );
            assert!(Parameters::<Bls12>::read(&longer[..], checked(mode)).is_ok());
        }
    }
}

#[test]
fn point_off_the_curve_is_refused_in_both_modes_like_bellperson() {
    let (_, bytes) = fixture();
    let record = record_of("l", 1);
    let mut corrupt = bytes.clone();
    corrupt[record.end - 1] ^= 1; // low byte of y
    for mode in MODES {
        let reason = assert_invalid_point(read_file(&corrupt, mode), "l", 1);
        assert!(reason.contains("not on the curve"), "{reason}");
        assert!(read_like_bellperson(&corrupt, mode).is_err());
    }
}

#[test]
fn point_outside_the_subgroup_is_refused_only_when_checked() {
    let (_, bytes) = fixture();
    for (section, index, point) in [
        ("l", 1, g1_outside_subgroup()),
        ("b_g2", 1, g2_outside_subgroup()),
    ] {
        let corrupt = replace(bytes, record_of(section, index).start, &point);
        let reason = assert_invalid_point(read_file(&corrupt, PointCheck::Checked), section, index);
        assert!(reason.contains("subgroup"), "{reason}");
        assert!(Parameters::<Bls12>::read(&corrupt[..], true).is_err());

        let accepted = read_file(&corrupt, PointCheck::Unchecked).unwrap();
        assert_equal(&accepted, &Parameters::read(&corrupt[..], false).unwrap());
    }
    // The verifying key is checked in either mode.
    let corrupt = replace(bytes, 0, &g1_outside_subgroup());
    for mode in MODES {
        assert_invalid_point(read_file(&corrupt, mode), "vk.alpha_g1", 0);
    }
}

#[test]
fn identity_is_refused_where_bellperson_refuses_it() {
    let (params, bytes) = fixture();
    for (section, index, range) in records(params) {
        let corrupt = replace(bytes, range.start, &identity(range.len()));
        for mode in MODES {
            let ours = read_like_bellperson(&corrupt, mode);
            if section.starts_with("vk.") && section != "vk.ic" {
                // Accepted, and equal to bellperson's (identity included), as checked above.
                ours.unwrap();
            } else {
                let reason = assert_invalid_point(ours, section, index);
                assert!(reason.contains("infinity"), "{reason}");
            }
        }
    }
}

#[test]
fn every_corrupted_point_gets_bellpersons_verdict_and_names_its_place() {
    let (params, bytes) = fixture();
    for (section, index, range) in records(params) {
        let size = range.len();
        let original = &bytes[range.clone()];
        let mut mutations: Vec<Vec<u8>> = vec![
            identity(size),
            // Infinity flag with a nonzero rest, sign flag on an uncompressed point.
            [&[0x40][..], &original[1..]].concat(),
            [&[original[0] | 0x20][..], &original[1..]].concat(),
            // The compression flag: bellperson decodes the first half as a compressed point.
            [&[original[0] | 0x80][..], &original[1..]].concat(),
            // x = 2^381 - 1, not below the modulus.
            [&[0x1f][..], &[0xff; 47], &original[48..]].concat(),
            // x = 0: (0, 2) is on the G1 curve, but blst refuses it.
            [vec![0; size - 1], vec![2]].concat(),
            // Flipped low bytes of the last coordinate.
            [&original[..size - 1], &[original[size - 1] ^ 0x01]].concat(),
            [&original[..size - 1], &[original[size - 1] ^ 0x80]].concat(),
        ];
        if size == G1 {
            let point = G1Affine::from_uncompressed(original.try_into().unwrap()).unwrap();
            mutations.push(g1_outside_subgroup());
            mutations.push((-point).to_uncompressed().as_ref().to_vec());
            mutations.push([point.to_compressed().as_ref(), &[0xab; 48]].concat());
        } else {
            let point = G2Affine::from_uncompressed(original.try_into().unwrap()).unwrap();
            mutations.push(g2_outside_subgroup());
            mutations.push((-point).to_uncompressed().as_ref().to_vec());
            mutations.push([point.to_compressed().as_ref(), &[0xab; 96]].concat());
        }
        for (m, mutation) in mutations.iter().enumerate() {
            let corrupt = replace(bytes, range.start, mutation);
            for mode in MODES {
                if let Err(err) = read_like_bellperson(&corrupt, mode) {
                    assert!(
                        matches!(&err, Error::ParamsInvalidPoint { section: s, index: i, .. } if *s == section && *i == index),
                        "{section}[{index}] mutation {m}: {err}"
                    );
                }
            }
            // The read that checks a content once decodes points by their coordinates and
            // puts them on the curve afterwards: the same verdict, with blst's reason.
            let once = read_checked_once(&corrupt, &CheckRecords::none()).map(|(p, _)| p);
            let checked = ProvingParameters::from_bytes(&corrupt, PointCheck::Checked);
            match (once, checked) {
                (Ok(once), Ok(_)) => {
                    assert_equal(&once, &Parameters::read(&corrupt[..], true).unwrap())
                }
                (
                    Err(Error::ParamsInvalidPoint {
                        section: s,
                        index: i,
                        reason,
                    }),
                    Err(Error::ParamsInvalidPoint {
                        reason: expected, ..
                    }),
                ) => {
                    assert_eq!((s, i), (section, index), "mutation {m}");
                    assert_eq!(reason, expected, "{section}[{index}] mutation {m}");
                }
                (once, checked) => panic!(
                    "{section}[{index}] mutation {m}: checked once {:?}, checked {:?}",
                    once.err(),
                    checked.err()
                ),
            }
        }
    }
}

#[test]
fn missing_file_is_an_io_error_naming_the_path() {
    let path = std::env::temp_dir().join("wgpu-groth16-no-such-dir/missing.params");
    let err = ProvingParameters::read(&path, PointCheck::Checked).unwrap_err();
    assert!(matches!(err, Error::ParamsIo { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

#[test]
fn check_fits_names_the_section_that_differs() {
    let (params, _) = fixture();
    let ours = ProvingParameters::from(params);
    let inputs = ours.vk.ic.len();
    let shape = [
        inputs,
        ours.l.len(),
        ours.h.len() + 1,
        ours.a.len() - inputs,
        0,
        ours.b_g1.len(),
    ];
    let fits = |s: [usize; 6]| ours.check_fits(s[0], s[1], s[2], s[3], s[4], s[5]);
    fits(shape).unwrap();
    for (arg, section) in [(0, "vk.ic"), (1, "l"), (2, "h"), (3, "a"), (5, "b_g1")] {
        let mut wrong = shape;
        wrong[arg] += 1;
        match fits(wrong) {
            Err(Error::ParamsMismatch(m)) => {
                assert!(m.contains(&format!("section {section} ")), "{m}")
            }
            other => panic!("{section}: {other:?}"),
        }
    }
}

#[test]
fn read_shape_counts_the_points_without_decoding_and_refuses_what_read_refuses() {
    let (params, bytes) = fixture();
    let file = TempFile::new(bytes);
    let shape = ProvingParameters::read_shape(file.path()).unwrap();
    let expected = ParamsShape {
        ic: params.vk.ic.len(),
        h: params.h.len(),
        l: params.l.len(),
        a: params.a.len(),
        b_g1: params.b_g1.len(),
        b_g2: params.b_g2.len(),
    };
    assert_eq!(shape, expected);
    let points = (bytes.len() - 6 * 4 - 3 * G1 - 3 * G2) as u64;
    assert_eq!(shape.point_bytes(), points, "as large as the file's points");
    // A point that does not decode is the decoder's business, not the shape's.
    let bad_point = replace(bytes, record_of("h", 0).start, &[0xff; G1]);
    let truncated = bytes[..bytes.len() - 1].to_vec();
    let trailing = [bytes.as_slice(), &[0]].concat();
    let bad_file = TempFile::new(&bad_point);
    assert_eq!(
        ProvingParameters::read_shape(bad_file.path()).unwrap(),
        expected
    );
    for corrupt in [truncated, trailing] {
        let file = TempFile::new(&corrupt);
        let ours = ProvingParameters::read_shape(file.path()).unwrap_err();
        let read = ProvingParameters::read(file.path(), PointCheck::Unchecked).unwrap_err();
        assert_eq!(ours.to_string(), read.to_string());
    }
}

#[test]
fn a_directory_or_fifo_is_refused_as_parameters_without_waiting_for_a_writer() {
    let dir =
        std::env::temp_dir().join(format!("wgpu-groth16-params-kinds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    for (path, kind) in [(&dir, "a directory"), (&fifo, "a FIFO")] {
        let read = ProvingParameters::read(path, PointCheck::Checked).unwrap_err();
        let shape = ProvingParameters::read_shape(path).unwrap_err();
        for err in [read, shape] {
            assert!(matches!(err, Error::ParamsIo { .. }), "{err:?}");
            assert!(
                err.to_string()
                    .contains(&format!("it is {kind}, not a regular file")),
                "{err}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn check_admits_names_the_section_a_circuits_bounds_exclude() {
    let (params, bytes) = fixture();
    let file = TempFile::new(bytes);
    let shape = ProvingParameters::read_shape(file.path()).unwrap();
    let (inputs, aux) = (params.vk.ic.len() as u64, params.l.len() as u64);
    let domain = params.h.len() as u64 + 1;
    shape
        .check_admits(&SizeBounds::exact(domain - 1, inputs, aux))
        .unwrap();
    let cases = [
        (SizeBounds::exact(domain - 1, inputs + 1, aux), "vk.ic"),
        (SizeBounds::exact(2 * domain, inputs, aux), "h"),
        (SizeBounds::exact(domain - 1, inputs, aux + 1), "l"),
    ];
    for (bounds, section) in cases {
        match shape.check_admits(&bounds) {
            Err(Error::ParamsMismatch(m)) => {
                assert!(m.contains(&format!("section {section} ")), "{m}")
            }
            other => panic!("{section}: {other:?}"),
        }
    }
    // A range admits every count inside it.
    let around = SizeBounds {
        constraints: 1..=domain,
        inputs,
        aux: aux - 1..=aux + 1,
    };
    shape.check_admits(&around).unwrap();
}

fn read_checked_once(bytes: &[u8], records: &CheckRecords) -> Result<(ProvingParameters, Checked)> {
    ProvingParameters::read_checked_once(TempFile::new(bytes).path(), records)
}

fn records_folder(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "wgpu-groth16-check-records-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn checked_once_reads_what_checked_reads_and_checks_each_content_once() {
    let (params, bytes) = fixture();
    let dir = records_folder("once");
    let records = CheckRecords::in_folder(dir.clone());
    let (first, how) = read_checked_once(bytes, &records).unwrap();
    assert_equal(&first, params);
    assert_eq!(how, Checked::Now);
    let (second, how) = read_checked_once(bytes, &records).unwrap();
    assert_equal(&second, params);
    assert_eq!(how, Checked::Before);
    // Without records every read checks.
    let (_, how) = read_checked_once(bytes, &CheckRecords::none()).unwrap();
    assert_eq!(how, Checked::Now);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn checked_once_refuses_a_point_outside_the_subgroup_even_after_the_file_was_checked() {
    let (_, bytes) = fixture();
    let dir = records_folder("altered");
    let records = CheckRecords::in_folder(dir.clone());
    assert_eq!(read_checked_once(bytes, &records).unwrap().1, Checked::Now);
    for (section, index, point) in [
        ("h", 0, g1_outside_subgroup()),
        ("l", 1, g1_outside_subgroup()),
        ("b_g2", 1, g2_outside_subgroup()),
    ] {
        // The same file with one point replaced: its digest is another, so it is checked.
        let altered = replace(bytes, record_of(section, index).start, &point);
        let result = read_checked_once(&altered, &records).map(|(p, _)| p);
        let reason = assert_invalid_point(result, section, index);
        assert!(reason.contains("subgroup"), "{reason}");
    }
    // A point off the curve is another content too: checked, and refused with blst's reason.
    let mut off_curve = bytes.clone();
    off_curve[record_of("a", 0).end - 1] ^= 1;
    let reason = assert_invalid_point(
        read_checked_once(&off_curve, &records).map(|(p, _)| p),
        "a",
        0,
    );
    assert!(reason.contains("not on the curve"), "{reason}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A file recorded as made here is read without its checks the first time, its content
/// found recorded; one of its points altered afterwards is another content, checked (and
/// refused: the altered point is outside the subgroup).
#[test]
fn a_file_recorded_as_made_here_is_read_as_checked_before_until_it_changes() {
    let (params, bytes) = fixture();
    let dir = records_folder("made-here");
    let records = CheckRecords::in_folder(dir.clone());
    let file = TempFile::new(bytes);
    ProvingParameters::record_made_here(file.path(), &records).unwrap();
    let (read, how) = ProvingParameters::read_checked_once(file.path(), &records).unwrap();
    assert_equal(&read, params);
    assert_eq!(how, Checked::Before);
    let altered = replace(bytes, record_of("b_g2", 1).start, &g2_outside_subgroup());
    let result = read_checked_once(&altered, &records).map(|(p, _)| p);
    let reason = assert_invalid_point(result, "b_g2", 1);
    assert!(reason.contains("subgroup"), "{reason}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// The published digest of `bytes`: the first 16 bytes of their BLAKE2b-512.
fn published_digest(bytes: &[u8]) -> [u8; PUBLISHED_DIGEST_BYTES] {
    blake2b_simd::blake2b(bytes).as_bytes()[..PUBLISHED_DIGEST_BYTES]
        .try_into()
        .unwrap()
}

fn published(name: &Path, digest: [u8; PUBLISHED_DIGEST_BYTES]) -> Arc<PublishedDigests> {
    let mut published = PublishedDigests::default();
    published.insert(name.file_name().unwrap().to_str().unwrap(), digest);
    Arc::new(published)
}

/// A file whose name is published with its content's digest is taken as the setup's: its
/// points need no check (a point outside the subgroup passes, which only a checked read
/// would refuse), and the next read finds it recorded. The checks run beside the digest's
/// hash, so a valid file may be found checked first. Under another digest it is checked as
/// any other file.
#[test]
fn a_published_file_is_not_checked_and_another_digest_is() {
    let (params, bytes) = fixture();
    let altered = replace(bytes, record_of("l", 1).start, &g1_outside_subgroup());
    let dir = records_folder("published");
    let file = TempFile::new(bytes);
    let trusted = CheckRecords::in_folder(dir.clone())
        .with_published(published(file.path(), published_digest(bytes)));
    let (read, how) = ProvingParameters::read_checked_once(file.path(), &trusted).unwrap();
    assert_equal(&read, params);
    assert!(matches!(how, Checked::Published | Checked::Now), "{how:?}");
    let (_, how) = ProvingParameters::read_checked_once(file.path(), &trusted).unwrap();
    assert_eq!(how, Checked::Before);

    let file = TempFile::new(&altered);
    // No records from here on: a read that skips the checks records the content as checked.
    let vouched =
        CheckRecords::none().with_published(published(file.path(), published_digest(&altered)));
    let (_, how) = ProvingParameters::read_checked_once(file.path(), &vouched).unwrap();
    assert_eq!(
        how,
        Checked::Published,
        "the publisher vouches for these points"
    );

    let file = TempFile::new(&altered);
    let other =
        CheckRecords::none().with_published(published(file.path(), published_digest(bytes)));
    let result = ProvingParameters::read_checked_once(file.path(), &other).map(|(p, _)| p);
    let reason = assert_invalid_point(result, "l", 1);
    assert!(reason.contains("subgroup"), "{reason}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Random parameters' bases come out of one inversion per run of points: each equals the
/// point's own affine form, the identity included.
#[test]
fn batch_affine_conversion_equals_each_points_own() {
    use group::{Curve, Group};
    use wgpu_groth16::curve::{GpuCurve, G1, G2};

    fn check<C: GpuCurve>() {
        let mut rng = ChaCha20Rng::seed_from_u64(11);
        let mut points: Vec<C::Projective> =
            (0..40).map(|_| C::Projective::random(&mut rng)).collect();
        points[0] = C::Projective::identity();
        points[17] = C::Projective::identity();
        points[39] = C::Projective::identity();
        // Not normalized: Z is not one.
        points[5] = points[6].double();
        let mut out = vec![C::Projective::identity().to_affine(); points.len()];
        C::to_affine_batch(&points, &mut out);
        for (i, (point, affine)) in points.iter().zip(&out).enumerate() {
            assert!(point.to_affine() == *affine, "{} point {i}", C::NAME);
        }
    }
    check::<G1>();
    check::<G2>();
}
