//! Points as a `.params` file holds them: decoded by blst as bellperson decodes them, in
//! parallel, checked or not, hashed as they go where a check record may vouch for them.

use blstrs::{Fp, Fp2, G1Affine, G2Affine};
use ff::Field;
use group::prime::PrimeCurveAffine;
use rayon::prelude::*;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use super::file::Source;
use super::PointCheck;
use crate::error::{Error, Result};

pub(super) const G1_SIZE: usize = 96;
pub(super) const G2_SIZE: usize = 192;

/// G1 and G2 behind one decoder.
pub(super) trait FilePoint: PrimeCurveAffine + Default + Send + Sync {
    const SIZE: usize;
    /// blst's deserializer, which is all that blstrs' `from_uncompressed_unchecked` runs.
    fn deserialize(bytes: &[u8]) -> Option<Self>;
    /// The point whose coordinates `bytes` hold, each converted to Montgomery form, if no
    /// flag bit is set and each coordinate is below the modulus; nothing else is checked
    /// (about half of `deserialize`'s time on the development box; the curve check is left to
    /// [`off_curve`](Self::off_curve), for files no record vouches for).
    fn from_coordinates(bytes: &[u8]) -> Option<Self>;
    /// Why `deserialize` would refuse a point that [`from_coordinates`](Self::from_coordinates)
    /// gave, if it would.
    fn off_curve(&self) -> Option<&'static str>;
    /// What blstrs' `from_uncompressed` checks on top of `deserialize`.
    fn on_curve_in_subgroup(&self) -> bool;
    /// The point uncompressed, as bellperson writes it, into `out` of `SIZE` bytes.
    fn serialize(&self, out: &mut [u8]);
}

impl FilePoint for G1Affine {
    const SIZE: usize = G1_SIZE;
    fn deserialize(bytes: &[u8]) -> Option<Self> {
        Option::from(G1Affine::from_uncompressed_unchecked(
            bytes.try_into().ok()?,
        ))
    }
    fn from_coordinates(bytes: &[u8]) -> Option<Self> {
        let [x, y] = coordinates(bytes)?;
        Some(G1Affine::from_raw_unchecked(x, y, false))
    }
    fn off_curve(&self) -> Option<&'static str> {
        if !bool::from(self.is_on_curve()) {
            Some(NOT_ON_THE_CURVE)
        } else if self.x().is_zero_vartime() {
            Some(X_ZERO)
        } else {
            None
        }
    }
    fn on_curve_in_subgroup(&self) -> bool {
        (self.is_on_curve() & self.is_torsion_free()).into()
    }
    fn serialize(&self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_uncompressed());
    }
}

impl FilePoint for G2Affine {
    const SIZE: usize = G2_SIZE;
    fn deserialize(bytes: &[u8]) -> Option<Self> {
        Option::from(G2Affine::from_uncompressed_unchecked(
            bytes.try_into().ok()?,
        ))
    }
    fn from_coordinates(bytes: &[u8]) -> Option<Self> {
        // Each coordinate's c1 before its c0, as bellperson writes them.
        let [x1, x0, y1, y0] = coordinates(bytes)?;
        Some(G2Affine::from_raw_unchecked(
            Fp2::new(x0, x1),
            Fp2::new(y0, y1),
            false,
        ))
    }
    fn off_curve(&self) -> Option<&'static str> {
        (!bool::from(self.is_on_curve())).then_some(NOT_ON_THE_CURVE)
    }
    fn on_curve_in_subgroup(&self) -> bool {
        (self.is_on_curve() & self.is_torsion_free()).into()
    }
    fn serialize(&self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_uncompressed());
    }
}

const NOT_ON_THE_CURVE: &str = "not on the curve";
const X_ZERO: &str = "x = 0: blst refuses the points (0, ±2), which are not in G1";

/// The field modulus p, in 64-bit limbs from the least significant.
const MODULUS: [u64; 6] = [
    0xb9fe_ffff_ffff_aaab,
    0x1eab_fffe_b153_ffff,
    0x6730_d2a0_f6b0_f624,
    0x6477_4b84_f385_12bf,
    0x4b1b_a7b6_434b_acd7,
    0x1a01_11ea_397f_e69a,
];

/// R^2 mod p as an `Fp`'s limbs (the Montgomery form of R = 2^384 mod p): a Montgomery
/// product with it takes a canonical value into Montgomery form.
fn montgomery_r2() -> Fp {
    static R2: std::sync::OnceLock<Fp> = std::sync::OnceLock::new();
    *R2.get_or_init(|| Fp::from(2u64).pow_vartime([384]))
}

/// The big-endian coordinates of `bytes` (48 bytes each) in Montgomery form, if the first
/// byte's three flag bits are clear, each is below the modulus, and not all are zero (blst
/// refuses that encoding; read by its coordinates it would be G2's identity, which passes
/// the curve and subgroup checks).
fn coordinates<const N: usize>(bytes: &[u8]) -> Option<[Fp; N]> {
    if bytes.len() != N * 48 || bytes[0] & 0xe0 != 0 || bytes.iter().all(|&b| b == 0) {
        return None;
    }
    let r2 = montgomery_r2();
    let mut out = [Fp::ZERO; N];
    for (fp, be) in out.iter_mut().zip(bytes.chunks_exact(48)) {
        let mut limbs = [0u64; 6];
        for (limb, word) in limbs.iter_mut().rev().zip(be.chunks_exact(8)) {
            *limb = u64::from_be_bytes(word.try_into().ok()?);
        }
        if !crate::field::is_below(&limbs, &MODULUS) {
            return None;
        }
        *fp = Fp::from_raw_unchecked(limbs) * r2;
    }
    Some(out)
}

/// Points encoded at once by [`write_section`]: 96 MiB of G1, 192 MiB of G2.
const WRITE_RUN: usize = 1 << 20;

/// A section as bellperson's `Parameters::write` writes it, its length (32 bits, big-endian)
/// then each point uncompressed, but encoded on every core a run at a time: bellperson
/// encodes one point after another on one thread.
pub(super) fn write_section<P: FilePoint>(
    w: &mut impl std::io::Write,
    section: &str,
    points: &[P],
) -> std::io::Result<()> {
    write_section_in_runs(w, section, points, WRITE_RUN)
}

fn write_section_in_runs<P: FilePoint>(
    w: &mut impl std::io::Write,
    section: &str,
    points: &[P],
    points_a_run: usize,
) -> std::io::Result<()> {
    let len = u32::try_from(points.len()).map_err(|_| {
        std::io::Error::other(format!(
            "section {section} has {} points, past a .params file's 32-bit count",
            points.len()
        ))
    })?;
    w.write_all(&len.to_be_bytes())?;
    let mut bytes = vec![0u8; points_a_run.min(points.len()) * P::SIZE];
    for run in points.chunks(points_a_run) {
        let bytes = &mut bytes[..run.len() * P::SIZE];
        bytes
            .par_chunks_mut(P::SIZE)
            .zip(run.par_iter())
            .with_min_len(4096)
            .for_each(|(out, point)| point.serialize(out));
        w.write_all(bytes)?;
    }
    Ok(())
}

/// Decodes one point as bellperson does: `Checked` is blstrs' `from_uncompressed`, split in
/// its two steps so that the error can say which one failed.
pub(super) fn decode_point<P: FilePoint>(
    section: &'static str,
    index: usize,
    bytes: &[u8],
    check: PointCheck,
    forbid_identity: bool,
) -> Result<P> {
    let invalid = |reason: String| Error::ParamsInvalidPoint {
        section,
        index,
        reason,
    };
    let point = P::deserialize(bytes).ok_or_else(|| invalid(why_undecodable(bytes)))?;
    if check == PointCheck::Checked && !point.on_curve_in_subgroup() {
        return Err(invalid(
            "on the curve but not in the prime-order subgroup".into(),
        ));
    }
    if forbid_identity && bool::from(point.is_identity()) {
        return Err(invalid(
            "the point at infinity, which bellperson never allows in this section".into(),
        ));
    }
    Ok(point)
}

/// How a section's points are decoded.
#[derive(Clone, Copy)]
enum Decode {
    /// As bellperson does ([`decode_point`]).
    Bellperson(PointCheck),
    /// Their coordinates only ([`FilePoint::from_coordinates`]); an encoding that
    /// has a flag set or a coordinate not below the modulus goes to blst, which refuses it
    /// (or reads the compressed point it holds) as bellperson does. Whether each is on the
    /// curve is left to a [`CurveCheck`](super::CurveCheck).
    Coordinates,
}

fn decode<P: FilePoint>(
    section: &'static str,
    index: usize,
    bytes: &[u8],
    how: Decode,
) -> Result<P> {
    match how {
        Decode::Bellperson(check) => decode_point(section, index, bytes, check, true),
        Decode::Coordinates => match P::from_coordinates(bytes) {
            Some(point) => Ok(point),
            None => decode_point(section, index, bytes, PointCheck::Unchecked, true),
        },
    }
}

/// Points per run: read into one private copy (and hashed, where asked) at once.
pub(super) const RUN: usize = 4096;

/// Bytes of a section of `P` points at `range`.
fn points_in(range: &Range<u64>, size: usize) -> usize {
    ((range.end - range.start) / size as u64) as usize
}

/// A private copy of run `run` of the section of `P` points at `range` (the last run may
/// be shorter).
fn read_run<P: FilePoint, S: Source + ?Sized>(
    source: &S,
    range: &Range<u64>,
    run: usize,
) -> Result<Vec<u8>> {
    let start = range.start + (run * RUN * P::SIZE) as u64;
    let mut copy = vec![0; (range.end - start).min((RUN * P::SIZE) as u64) as usize];
    source.read_at(start, &mut copy)?;
    Ok(copy)
}

/// Decodes a section on all rayon threads, a run at a time, straight into the vector that
/// keeps the points; with `hashed`, each run's copy is hashed too. On several bad points the
/// error names one of them, not necessarily the first.
fn decode_runs<P: FilePoint, S: Source + ?Sized>(
    section: &'static str,
    source: &S,
    range: &Range<u64>,
    how: Decode,
    hashed: bool,
) -> Result<(Vec<P>, Vec<blake3::Hash>)> {
    let count = points_in(range, P::SIZE);
    let mut points = Vec::with_capacity(count);
    points.par_extend(rayon::iter::repeat_n(P::default(), count));
    let runs: Vec<Option<blake3::Hash>> = points
        .par_chunks_mut(RUN)
        .enumerate()
        .map(|(run, points)| {
            let copy = read_run::<P, S>(source, range, run)?;
            for (i, (point, bytes)) in points
                .iter_mut()
                .zip(copy.chunks_exact(P::SIZE))
                .enumerate()
            {
                *point = decode(section, run * RUN + i, bytes, how)?;
            }
            Ok(hashed.then(|| blake3::hash(&copy)))
        })
        .collect::<Result<_>>()?;
    Ok((points, runs.into_iter().flatten().collect()))
}

/// Decodes a section, checked per `check`.
pub(super) fn decode_all<P: FilePoint, S: Source + ?Sized>(
    section: &'static str,
    source: &S,
    range: &Range<u64>,
    check: PointCheck,
) -> Result<Vec<P>> {
    Ok(decode_runs(section, source, range, Decode::Bellperson(check), false)?.0)
}

/// Decodes a section by its points' coordinates (neither on the curve nor in the subgroup
/// yet: a [`CurveCheck`](super::CurveCheck) follows where no record vouches for the
/// digest) and hashes it: each run of points is read into a private copy, hashed and decoded
/// from the copy (so a file changing meanwhile cannot slip other points past the hash), and
/// the section's digest is the hash of its count and its runs' hashes in order.
pub(super) fn decode_hashed<P: FilePoint, S: Source + ?Sized>(
    section: &'static str,
    source: &S,
    range: &Range<u64>,
) -> Result<(Vec<P>, blake3::Hash)> {
    let (points, runs) = decode_runs(section, source, range, Decode::Coordinates, true)?;
    let digest = section_digest(section, points.len(), &runs);
    Ok((points, digest))
}

/// The digest [`decode_hashed`] gives a section, without decoding it.
pub(super) fn hash_section<P: FilePoint, S: Source + ?Sized>(
    section: &'static str,
    source: &S,
    range: &Range<u64>,
) -> Result<blake3::Hash> {
    let count = points_in(range, P::SIZE);
    let runs: Vec<blake3::Hash> = (0..count.div_ceil(RUN))
        .into_par_iter()
        .map(|run| Ok(blake3::hash(&read_run::<P, S>(source, range, run)?)))
        .collect::<Result<_>>()?;
    Ok(section_digest(section, count, &runs))
}

/// A section's digest from its runs' digests.
fn section_digest(section: &str, count: usize, runs: &[blake3::Hash]) -> blake3::Hash {
    let mut hasher = blake3::Hasher::new();
    hasher.update(section.as_bytes());
    hasher.update(&(count as u64).to_le_bytes());
    runs.iter().for_each(|run| {
        hasher.update(run.as_bytes());
    });
    hasher.finalize()
}

/// Runs copied and hashed at once by [`hash_in_order`].
const RUNS_AT_ONCE: usize = 64;

/// A batch of [`RUNS_AT_ONCE`] private copies of runs and their digests.
type Copies = Vec<(Vec<u8>, blake3::Hash)>;

/// The digest [`decode_hashed`] gives a section of points of `P`, and the same private
/// copies, in order, into `whole`: a digest of the file whose points, decoded from other
/// copies, are those the file's digest covers when the two section digests agree. `None`
/// once `stop` is set, or where the file cannot be read (the decode beside it says why).
///
/// BLAKE2b runs on this thread alone and bounds the read (~1.1 GiB/s a core), so a thread
/// of its own reads the next batch of copies and hashes them with BLAKE3 (together ~2 GiB/s
/// on one core) while this one hashes the batch before. Neither uses rayon's pool: read
/// there, the batches waited behind the decode's and the checks' work (the hash ran at 0.57
/// GiB/s at 32 GiB, and behind checks on the CPU it waited for all of them).
pub(super) fn hash_in_order<P: FilePoint, S: Source + ?Sized>(
    section: &'static str,
    source: &S,
    range: &Range<u64>,
    whole: &mut blake2b_simd::State,
    stop: &AtomicBool,
) -> Option<blake3::Hash> {
    let count = points_in(range, P::SIZE);
    let run_count = count.div_ceil(RUN);
    let mut runs = Vec::with_capacity(run_count);
    std::thread::scope(|scope| {
        let (batches, copied) = std::sync::mpsc::sync_channel::<Copies>(1);
        scope.spawn(move || {
            for first in (0..run_count).step_by(RUNS_AT_ONCE) {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let copies = (first..run_count.min(first + RUNS_AT_ONCE))
                    .map(|run| {
                        let copy = read_run::<P, S>(source, range, run)?;
                        let digest = blake3::hash(&copy);
                        Ok((copy, digest))
                    })
                    .collect::<Result<Copies>>();
                // A read error ends the batches early, short of `run_count`.
                let Ok(copies) = copies else { return };
                if batches.send(copies).is_err() {
                    return;
                }
            }
        });
        for (copy, digest) in copied.into_iter().flatten() {
            whole.update(&copy);
            runs.push(digest);
        }
    });
    (runs.len() == run_count && !stop.load(Ordering::Relaxed))
        .then(|| section_digest(section, count, &runs))
}

pub(super) fn combine(digests: &[blake3::Hash]) -> blake3::Hash {
    let mut hasher = blake3::Hasher::new();
    digests.iter().for_each(|d| {
        hasher.update(d.as_bytes());
    });
    hasher.finalize()
}

/// Why blst refused an encoding, retracing its checks in order (error path only).
pub(super) fn why_undecodable(bytes: &[u8]) -> String {
    let flags = bytes[0] & 0xe0;
    if flags & 0x80 != 0 {
        return format!(
            "the compression flag is set and the first {} bytes are not a compressed point",
            bytes.len() / 2
        );
    }
    if flags != 0 {
        return format!(
            "invalid flag bits {flags:#04x} (the infinity flag needs every other bit zero, \
             the sign flag belongs to compressed points)"
        );
    }
    let canonical = bytes.chunks_exact(48).all(|c| {
        c.try_into()
            .is_ok_and(|c| Fp::from_bytes_be(c).is_some().into())
    });
    if !canonical {
        return "a coordinate is not below the field modulus".into();
    }
    if bytes.len() == G1_SIZE && bytes[..48].iter().all(|&b| b == 0) {
        return X_ZERO.into();
    }
    NOT_ON_THE_CURVE.into()
}

#[cfg(test)]
mod tests {
    use blstrs::{G1Projective, G2Projective};
    use group::{Curve, Group};
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;

    use super::*;

    /// bellperson's loop: the count, then one point after another.
    fn written_one_by_one<P: FilePoint>(points: &[P]) -> Vec<u8> {
        let mut bytes = (points.len() as u32).to_be_bytes().to_vec();
        for point in points {
            let mut out = vec![0u8; P::SIZE];
            point.serialize(&mut out);
            bytes.extend(out);
        }
        bytes
    }

    /// The big-endian bytes of p - 1 and p.
    fn below_and_at_modulus() -> [[u8; 48]; 2] {
        let mut at = [0u8; 48];
        for (word, limb) in at.chunks_exact_mut(8).zip(MODULUS.iter().rev()) {
            word.copy_from_slice(&limb.to_be_bytes());
        }
        let mut below = at;
        below[47] -= 1;
        [below, at]
    }

    /// The in-order hash reads copies a batch ahead on other threads: over more batches
    /// than one (the last run short), the file's BLAKE2b is that of the bytes in order and
    /// the section digest is the decode's; a stopped hash gives nothing.
    #[test]
    fn hash_in_order_covers_the_bytes_in_order_across_batches() {
        use rand_core::RngCore;
        let points = 2 * RUNS_AT_ONCE * RUN + RUN / 2 + 1;
        let mut bytes = vec![0u8; 7 + points * G1_SIZE + 5];
        ChaCha20Rng::seed_from_u64(9).fill_bytes(&mut bytes);
        let range = 7..(7 + points * G1_SIZE) as u64;
        let section = &bytes[range.start as usize..range.end as usize];
        let mut whole = blake2b_simd::State::new();
        let running = AtomicBool::new(false);
        let digest = hash_in_order::<G1Affine, [u8]>("h", &bytes[..], &range, &mut whole, &running);
        assert_eq!(whole.finalize(), blake2b_simd::blake2b(section));
        assert_eq!(
            digest,
            Some(hash_section::<G1Affine, [u8]>("h", &bytes[..], &range).unwrap())
        );
        let stopped = AtomicBool::new(true);
        let mut whole = blake2b_simd::State::new();
        assert_eq!(
            hash_in_order::<G1Affine, [u8]>("h", &bytes[..], &range, &mut whole, &stopped),
            None
        );
    }

    #[test]
    fn coordinates_decode_as_blst_does() {
        let mut rng = ChaCha20Rng::seed_from_u64(8);
        for _ in 0..20 {
            let p = G1Projective::random(&mut rng).to_affine();
            let decoded = G1Affine::from_coordinates(&p.to_uncompressed()).unwrap();
            assert_eq!(decoded, p);
            assert_eq!(decoded.off_curve(), None);
        }
        for _ in 0..5 {
            let p = G2Projective::random(&mut rng).to_affine();
            let decoded = G2Affine::from_coordinates(&p.to_uncompressed()).unwrap();
            assert_eq!(decoded, p);
            assert_eq!(decoded.off_curve(), None);
        }
        let [below, at] = below_and_at_modulus();
        let [below_p] = coordinates::<1>(&below).unwrap();
        assert_eq!(below_p, Fp::from_bytes_be(&below).unwrap());
        assert!(coordinates::<1>(&at).is_none());
        // Flag bits go to blst.
        let mut flagged = G1Projective::random(&mut rng).to_affine().to_uncompressed();
        flagged[0] |= 0x80;
        assert!(G1Affine::from_coordinates(&flagged).is_none());
        // Off the curve, as blst finds it.
        let mut off = G1Projective::random(&mut rng).to_affine().to_uncompressed();
        off[95] ^= 1;
        let off = G1Affine::from_coordinates(&off).unwrap();
        assert_eq!(off.off_curve(), Some(NOT_ON_THE_CURVE));
        // The all-zero encoding goes to blst too, which refuses it as bellperson does: read
        // by its coordinates it would be G2's identity, on the curve and in the subgroup.
        assert!(G1Affine::from_coordinates(&[0; G1_SIZE]).is_none());
        assert!(G2Affine::from_coordinates(&[0; G2_SIZE]).is_none());
        for how in [Decode::Coordinates, Decode::Bellperson(PointCheck::Checked)] {
            assert!(decode::<G1Affine>("a", 0, &[0; G1_SIZE], how).is_err());
            assert!(decode::<G2Affine>("b_g2", 0, &[0; G2_SIZE], how).is_err());
        }
    }

    #[test]
    fn sections_written_in_runs_equal_those_written_one_by_one() {
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        let g1: Vec<G1Affine> = (0..10)
            .map(|_| G1Projective::random(&mut rng).to_affine())
            .chain([G1Affine::identity()])
            .collect();
        let g2: Vec<G2Affine> = (0..5)
            .map(|_| G2Projective::random(&mut rng).to_affine())
            .collect();
        for run in [1, 3, 11, 64] {
            let mut written = Vec::new();
            write_section_in_runs(&mut written, "g1", &g1, run).unwrap();
            assert_eq!(written, written_one_by_one(&g1), "G1 in runs of {run}");
            let mut written = Vec::new();
            write_section_in_runs(&mut written, "g2", &g2, run).unwrap();
            assert_eq!(written, written_one_by_one(&g2), "G2 in runs of {run}");
        }
        // Encoded as blstrs encodes one point.
        assert_eq!(
            written_one_by_one(&g1[..1])[4..],
            g1[0].to_uncompressed()[..]
        );
    }
}
