//! Groth16 proving parameters: bellperson's `.params` files, read by offset and decoded in
//! parallel, checked exactly as bellperson checks them, and written back byte for byte.
//!
//! The format is bellperson 0.27's `Parameters::write`, with no header and big-endian counts:
//! the verifying key (`alpha_g1`, `beta_g1`, `beta_g2`, `gamma_g2`, `delta_g1`, `delta_g2`, then
//! a `u32` count and `ic`), then `h`, `l`, `a`, `b_g1` and `b_g2`, each a `u32` count followed by
//! its points. Points are uncompressed: 96 bytes in G1, 192 in G2.
//!
//! What bellperson's `Parameters::read` accepts, and so what we accept:
//! - The verifying key is always fully checked, whatever the mode; its six single points may
//!   be the identity, `ic` points may not.
//! - `h`, `l`, `a`, `b_g1` and `b_g2` are checked per [`PointCheck`] and never hold the identity.
//! - Bytes are decoded by blstrs/blst themselves, so every quirk carries over: a 96-byte G1
//!   record (192-byte G2) whose first byte has the compression flag is decoded as a compressed
//!   point from its first half, and the rest is ignored.
//!
//! One deliberate difference: bellperson ignores bytes after `b_g2`; we refuse them
//! ([`Error::ParamsFormat`]), as they mean a file that is not what it claims to be.
//!
//! `file` cuts a file into its sections; `points` decodes and checks their points;
//! `records` remembers contents whose points passed every check.

mod file;
mod points;
mod records;

use std::fmt;
use std::io::{self, BufWriter, Write};
use std::ops::{Range, RangeInclusive};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use bellperson::groth16::{Parameters, VerifyingKey};
use blstrs::{Bls12, G1Affine, G1Projective, G2Affine, G2Projective};
use group::prime::PrimeCurveAffine;
use group::Group;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use rayon::prelude::*;

pub use records::{CheckRecords, Checked, PublishedDigests, PUBLISHED_DIGEST_BYTES};

use file::{ParamsFile, Sections, Source};
use points::{
    combine, decode_all, decode_hashed, hash_in_order, hash_section, write_section, FilePoint,
    G1_SIZE, G2_SIZE,
};

use super::circuits::SizeBounds;
use crate::curve::{sample_bases, G1, G2};
use crate::error::{Error, Result};
use crate::recorded::Shape;

/// How far points of `h`, `l`, `a`, `b_g1` and `b_g2` are checked (the verifying key is
/// always checked fully, as bellperson does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointCheck {
    /// On the curve and in the prime-order subgroup: bellperson's `read(.., true)`.
    Checked,
    /// bellperson's `read(.., false)`, i.e. blstrs 0.7's `from_uncompressed_unchecked`. Despite
    /// the name that is blst's full deserializer: it still rejects invalid flag bits,
    /// coordinates not below the field modulus, points off the curve, and the G1 points
    /// (0, ±2). Only the subgroup check is skipped, which is most of the decoding time.
    Unchecked,
}

/// Groth16 proving parameters for BLS12-381, in the same representation as bellperson's
/// `Parameters<Bls12>` so that conversions either way share the point vectors. blstrs affine
/// points are also the layout the GPU kernels upload, so decoding a file is the conversion.
#[derive(Clone)]
pub struct ProvingParameters {
    pub vk: VerifyingKey<Bls12>,
    pub h: Arc<Vec<G1Affine>>,
    pub l: Arc<Vec<G1Affine>>,
    pub a: Arc<Vec<G1Affine>>,
    pub b_g1: Arc<Vec<G1Affine>>,
    pub b_g2: Arc<Vec<G2Affine>>,
}

// Lengths only: real sections hold hundreds of millions of points.
impl fmt::Debug for ProvingParameters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProvingParameters")
            .field("ic", &self.vk.ic.len())
            .field("h", &self.h.len())
            .field("l", &self.l.len())
            .field("a", &self.a.len())
            .field("b_g1", &self.b_g1.len())
            .field("b_g2", &self.b_g2.len())
            .finish()
    }
}

impl From<Parameters<Bls12>> for ProvingParameters {
    fn from(p: Parameters<Bls12>) -> Self {
        ProvingParameters {
            vk: p.vk,
            h: p.h,
            l: p.l,
            a: p.a,
            b_g1: p.b_g1,
            b_g2: p.b_g2,
        }
    }
}

impl From<&Parameters<Bls12>> for ProvingParameters {
    fn from(p: &Parameters<Bls12>) -> Self {
        p.clone().into()
    }
}

impl ProvingParameters {
    /// Bytes of the bases as the device holds them (affine points).
    pub fn bases_bytes(&self) -> u64 {
        use crate::curve::{GpuCurve, G1, G2};
        let g1 = self.h.len() + self.l.len() + self.a.len() + self.b_g1.len();
        (g1 * G1::AFFINE_BYTES + self.b_g2.len() * G2::AFFINE_BYTES) as u64
    }

    /// Reads a `.params` file by offset on all rayon threads (never mapped: a file
    /// truncated meanwhile is an error, not a crash). Every count is checked against the
    /// file length before a point is decoded.
    pub fn read(path: &Path, check: PointCheck) -> Result<Self> {
        let start = Instant::now();
        let file = ParamsFile::open(path)?;
        let params = Self::from_source(&file, check)?;
        let seconds = start.elapsed().as_secs_f64();
        log::info!(
            "read {} ({:.2} GiB, {check:?}) in {seconds:.2} s: ic {}, h {}, l {}, a {}, b_g1 {}, b_g2 {} points",
            path.display(),
            file.len() as f64 / (1u64 << 30) as f64,
            params.vk.ic.len(),
            params.h.len(),
            params.l.len(),
            params.a.len(),
            params.b_g1.len(),
            params.b_g2.len(),
        );
        Ok(params)
    }

    /// Reads a `.params` file as [`PointCheck::Checked`] does, but pays for the subgroup
    /// checks (most of a checked read's time) only once per content: the points are decoded
    /// by their coordinates alone (not yet put on the curve) and hashed
    /// (BLAKE3 over a private copy of each run of bytes, the copy they are decoded from, so
    /// a file changing meanwhile cannot slip other points past the hash), and when
    /// `records` holds the digest, those exact points passed every check before. Otherwise
    /// they are checked now and the digest recorded. A corrupt or altered file has another
    /// digest, so it is checked, and refused. A file that `records` says is published under
    /// its name ([`PublishedDigests`]) and whose BLAKE2b is the published digest is not
    /// checked: that digest is computed beside the decode, in order over private copies
    /// whose section digests must be those of the points decoded.
    pub fn read_checked_once(path: &Path, records: &CheckRecords) -> Result<(Self, Checked)> {
        Self::read_checked_once_with(path, records, &CpuCurveCheck)
    }

    /// [`read_checked_once`](Self::read_checked_once), the subgroup checks (where they
    /// run) by `check`.
    pub fn read_checked_once_with(
        path: &Path,
        records: &CheckRecords,
        check: &dyn CurveCheck,
    ) -> Result<(Self, Checked)> {
        let file = ParamsFile::open(path)?;
        Self::read_checked_once_from(&file, path, records, check)
    }

    /// [`read_checked_once_with`](Self::read_checked_once_with) of an opened file.
    fn read_checked_once_from(
        file: &ParamsFile,
        path: &Path,
        records: &CheckRecords,
        check: &dyn CurveCheck,
    ) -> Result<(Self, Checked)> {
        let start = Instant::now();
        let sections = Sections::split(file)?;
        let name = path.file_name().and_then(|name| name.to_str());
        let published = name.and_then(|name| records.published().get(name));
        let stop = AtomicBool::new(false);
        let (params, how) = std::thread::scope(|scope| -> Result<_> {
            // A published name's digest is computed beside the decode, on a thread of its own
            // (BLAKE2b runs on one core); stopped when the decode fails, finds the content
            // recorded, or the checks finish first.
            let (done, finished) = mpsc::channel();
            if published.is_some() {
                let (done, sections, stop) = (done.clone(), &sections, &stop);
                scope.spawn(move || done.send(Finished::Hashed(hash_published(sections, stop))));
            }
            let _stop = StopOnDrop(&stop);
            let vk = sections.verifying_key()?;
            let parts = &sections.parts;
            let mut digests = Vec::new();
            let mut section = |name, range| -> Result<Arc<Vec<G1Affine>>> {
                let (points, digest) = decode_hashed(name, file, range)?;
                digests.push(digest);
                Ok(Arc::new(points))
            };
            let (h, l, a, b_g1) = (
                section("h", &parts.h)?,
                section("l", &parts.l)?,
                section("a", &parts.a)?,
                section("b_g1", &parts.b_g1)?,
            );
            let (b_g2, digest) = decode_hashed::<G2Affine, _>("b_g2", file, &parts.b_g2)?;
            digests.push(digest);
            let params = ProvingParameters {
                vk,
                h,
                l,
                a,
                b_g1,
                b_g2: Arc::new(b_g2),
            };
            let digest = combine(&digests);
            if records.holds(&digest) {
                return Ok((params, Checked::Before));
            }
            // The checks run beside the published digest's hash (at 32 GiB each takes over a
            // minute): whichever accepts the points first ends the read. A refusal waits for
            // the hash, which may still vouch for them: what is accepted does not depend on
            // which comes first, only the label does.
            let published_first = AtomicBool::new(false);
            let how = std::thread::scope(|checking| -> Result<Checked> {
                let (done, params, published_first) = (done, &params, &published_first);
                checking.spawn(move || {
                    done.send(Finished::Checked(
                        params.check_points(check, published_first),
                    ))
                });
                let mut refused = None;
                for finished in finished.iter() {
                    match finished {
                        Finished::Checked(Ok(())) => return Ok(Checked::Now),
                        Finished::Checked(Err(e)) => refused = Some(e),
                        Finished::Hashed(Some(in_order)) => {
                            let matches = published.is_some_and(|p| in_order.matches(p, &digests));
                            in_order.log(path, file.len(), matches);
                            if matches {
                                published_first.store(true, Ordering::Relaxed);
                                return Ok(Checked::Published);
                            }
                        }
                        Finished::Hashed(None) => {}
                    }
                }
                Err(refused.unwrap_or_else(|| {
                    Error::Internal("the point checks ended without an answer".into())
                }))
            })?;
            records.record(&digest);
            Ok((params, how))
        })?;
        let checked_on = match how {
            Checked::Now => format!(" {}", check.describe()),
            _ => String::new(),
        };
        log::info!(
            "read {} ({:.2} GiB, points checked {how:?}{checked_on}) in {:.2} s",
            path.display(),
            file.len() as f64 / (1u64 << 30) as f64,
            start.elapsed().as_secs_f64()
        );
        Ok((params, how))
    }

    /// Every point of `h`, `l`, `a`, `b_g1` and `b_g2`, decoded by its coordinates alone, a
    /// run of [`CHECK_RUN`] points at a time until `stop` is set: on the curve as blst's
    /// deserializer requires and in the subgroup, by `check`. The error names a bad point,
    /// with blst's reason.
    fn check_points(&self, check: &dyn CurveCheck, stop: &AtomicBool) -> Result<()> {
        for (section, points) in [
            ("h", &self.h),
            ("l", &self.l),
            ("a", &self.a),
            ("b_g1", &self.b_g1),
        ] {
            check_runs(section, points, CHECK_RUN, stop, |run| {
                check.first_invalid_g1(run)
            })?;
        }
        check_runs("b_g2", &self.b_g2, CHECK_RUN, stop, |run| {
            check.first_invalid_g2(run)
        })
    }

    /// Parameters of the right lengths for circuits of `shape`, with random points: not a
    /// trusted setup (proofs made with them do not verify), but every prover computes the same
    /// function of them, so timings and byte comparisons mean what they do with real
    /// parameters, and they take seconds to make instead of a setup's minutes to hours.
    pub fn random_for_shape(shape: &Shape, seed: u64) -> Self {
        let domain = shape.constraints.next_power_of_two();
        let b = shape.b_input_density + shape.b_aux_density;
        let g1 = |k: u64, n: usize| Arc::new(sample_bases::<G1>(seed * 16 + k, n));
        ProvingParameters {
            vk: Self::random_verifying_key(shape, seed),
            h: g1(0, domain - 1),
            l: g1(1, shape.aux),
            a: g1(2, shape.inputs + shape.a_aux_density),
            b_g1: g1(3, b),
            b_g2: Arc::new(sample_bases::<G2>(seed * 16 + 4, b)),
        }
    }

    /// The verifying key of [`random_for_shape`](Self::random_for_shape)`(shape, seed)`,
    /// without its points: what keys a recorded system to those parameters before they are
    /// made.
    pub fn random_verifying_key(shape: &Shape, seed: u64) -> VerifyingKey<Bls12> {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let g1_point = |rng: &mut ChaCha20Rng| G1Affine::from(G1Projective::random(rng));
        let g2_point = |rng: &mut ChaCha20Rng| G2Affine::from(G2Projective::random(rng));
        VerifyingKey::<Bls12> {
            alpha_g1: g1_point(&mut rng),
            beta_g1: g1_point(&mut rng),
            beta_g2: g2_point(&mut rng),
            gamma_g2: g2_point(&mut rng),
            delta_g1: g1_point(&mut rng),
            delta_g2: g2_point(&mut rng),
            ic: sample_bases::<G1>(seed * 16 + 5, shape.inputs),
        }
    }

    /// Records the content of the parameter file at `path` as checked, without checking
    /// it: for a file this process just wrote from points it made as multiples of points in
    /// their subgroups ([`random_for_shape`](Self::random_for_shape)), so that its first
    /// read skips the subgroup checks as any later read of checked content does (at 32 GiB
    /// those checks take about half an hour of CPU). Vouching for a file read from
    /// elsewhere this way would defeat the checks: don't.
    pub fn record_made_here(path: &Path, records: &CheckRecords) -> Result<()> {
        let file = ParamsFile::open(path)?;
        let parts = Sections::split(&file)?.parts;
        let digests = [
            hash_section::<G1Affine, _>("h", &file, &parts.h)?,
            hash_section::<G1Affine, _>("l", &file, &parts.l)?,
            hash_section::<G1Affine, _>("a", &file, &parts.a)?,
            hash_section::<G1Affine, _>("b_g1", &file, &parts.b_g1)?,
            hash_section::<G2Affine, _>("b_g2", &file, &parts.b_g2)?,
        ];
        records.record(&combine(&digests));
        Ok(())
    }

    /// The point counts of a `.params` file, from its six counts alone (neither mapped nor
    /// decoded): what a caller checks against a circuit and the machine's memory before
    /// reading the file.
    pub fn read_shape(path: &Path) -> Result<ParamsShape> {
        Ok(Sections::split(&ParamsFile::open(path)?)?.parts.shape())
    }

    /// Decodes the bytes of a `.params` file held in memory (what [`Self::read`] does with
    /// the file).
    pub fn from_bytes(bytes: &[u8], check: PointCheck) -> Result<Self> {
        Self::from_source(bytes, check)
    }

    fn from_source<S: Source + ?Sized>(source: &S, check: PointCheck) -> Result<Self> {
        // Cut the input into its parts first: a bad count fails here, before any allocation.
        let sections = Sections::split(source)?;
        let vk = sections.verifying_key()?;
        let parts = &sections.parts;
        Ok(ProvingParameters {
            vk,
            h: Arc::new(decode_all("h", source, &parts.h, check)?),
            l: Arc::new(decode_all("l", source, &parts.l, check)?),
            a: Arc::new(decode_all("a", source, &parts.a, check)?),
            b_g1: Arc::new(decode_all("b_g1", source, &parts.b_g1, check)?),
            b_g2: Arc::new(decode_all("b_g2", source, &parts.b_g2, check)?),
        })
    }

    /// Writes the parameters in bellperson's format, byte for byte what `Parameters::write`
    /// produces. Buffered here, so `w` may be a bare `File`. Returns `io::Result` because the
    /// crate's `Error` has no variant for a failed write; the caller knows the destination.
    pub fn write(&self, w: impl Write) -> io::Result<()> {
        let mut w = BufWriter::with_capacity(1 << 20, w);
        self.vk.write(&mut w)?;
        write_section(&mut w, "h", &self.h)?;
        write_section(&mut w, "l", &self.l)?;
        write_section(&mut w, "a", &self.a)?;
        write_section(&mut w, "b_g1", &self.b_g1)?;
        write_section(&mut w, "b_g2", &self.b_g2)?;
        w.flush()
    }

    /// The same parameters as bellperson's type (the point vectors are shared, not copied).
    pub fn to_bellperson(&self) -> Parameters<Bls12> {
        Parameters {
            vk: self.vk.clone(),
            h: self.h.clone(),
            l: self.l.clone(),
            a: self.a.clone(),
            b_g1: self.b_g1.clone(),
            b_g2: self.b_g2.clone(),
        }
    }

    /// Checks that the parameters were made for a circuit of this shape: `inputs` public
    /// inputs (with the constant one), `aux` auxiliary variables, an evaluation domain of
    /// `domain` points, and the densities of the A and B queries.
    pub fn check_fits(
        &self,
        inputs: usize,
        aux: usize,
        domain: usize,
        a_aux_density: usize,
        b_input_density: usize,
        b_aux_density: usize,
    ) -> Result<()> {
        let expected = [
            ("vk.ic", inputs, self.vk.ic.len()),
            ("h", domain.saturating_sub(1), self.h.len()),
            ("l", aux, self.l.len()),
            ("a", inputs + a_aux_density, self.a.len()),
            ("b_g1", b_input_density + b_aux_density, self.b_g1.len()),
            ("b_g2", b_input_density + b_aux_density, self.b_g2.len()),
        ];
        match expected.iter().find(|(_, want, found)| want != found) {
            Some((section, want, found)) => Err(Error::ParamsMismatch(format!(
                "section {section} has {found} points, the circuit needs {want}"
            ))),
            None => Ok(()),
        }
    }

    /// bellperson refuses to prove with an identity delta (a subverted CRS); so do we.
    pub fn check_delta(&self) -> Result<()> {
        let identity = bool::from(self.vk.delta_g1.is_identity())
            || bool::from(self.vk.delta_g2.is_identity());
        if identity {
            return Err(Error::ParamsInvalidPoint {
                section: "vk.delta",
                index: 0,
                reason: "delta is the identity (a subverted setup)".into(),
            });
        }
        Ok(())
    }
}

/// How many points each section of a `.params` file holds, known from its counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamsShape {
    pub ic: usize,
    pub h: usize,
    pub l: usize,
    pub a: usize,
    pub b_g1: usize,
    pub b_g2: usize,
}

impl ParamsShape {
    /// Bytes the decoded points take in memory: blstrs' affine points are as large as their
    /// uncompressed encoding (96 bytes in G1, 192 in G2).
    pub fn point_bytes(&self) -> u64 {
        let g1 = self.ic + self.h + self.l + self.a + self.b_g1;
        (g1 * G1_SIZE + self.b_g2 * G2_SIZE) as u64
    }

    /// Checks that parameters of this shape can be for a circuit within `bounds` (inputs,
    /// domain and aux variables; the densities are only known after synthesis, which
    /// [`ProvingParameters::check_fits`] checks): a file made for another circuit is refused
    /// before anything is decoded or synthesized.
    pub fn check_admits(&self, bounds: &SizeBounds) -> Result<()> {
        let domain = self.h as u64 + 1;
        let range = |r: &RangeInclusive<u64>| {
            if r.start() == r.end() {
                r.start().to_string()
            } else {
                format!("{} to {}", r.start(), r.end())
            }
        };
        let misfit = if self.ic as u64 != bounds.inputs {
            Some(("vk.ic", self.ic, bounds.inputs.to_string()))
        } else if !bounds.domains().contains(&domain) {
            let h = |d: &u64| d - 1;
            let want = h(bounds.domains().start())..=h(bounds.domains().end());
            Some(("h", self.h, range(&want)))
        } else if !bounds.aux.contains(&(self.l as u64)) {
            Some(("l", self.l, range(&bounds.aux)))
        } else {
            None
        };
        match misfit {
            Some((section, found, want)) => Err(Error::ParamsMismatch(format!(
                "section {section} has {found} points, the circuit needs {want}"
            ))),
            None => Ok(()),
        }
    }
}

/// Points checked at once by [`ProvingParameters::check_points`]: between runs it stops
/// when asked (a 32 GiB file's `h` is 2^27 points).
const CHECK_RUN: usize = 1 << 22;

/// [`ProvingParameters::check_points`] of one section, `run` points at a time,
/// `first_invalid` its curve and subgroup checks.
fn check_runs<P: FilePoint>(
    section: &'static str,
    points: &[P],
    run: usize,
    stop: &AtomicBool,
    first_invalid: impl Fn(&[P]) -> Result<Option<(usize, Invalid)>>,
) -> Result<()> {
    for (k, points) in points.chunks(run).enumerate() {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let Some((index, why)) = first_invalid(points)? else {
            continue;
        };
        let named = points.get(index).ok_or_else(|| {
            Error::Internal(format!(
                "the curve check named point {index} of a run of {}",
                points.len()
            ))
        })?;
        let reason = match why {
            // blst's own reason, asked of the one point.
            Invalid::OffCurve => named.off_curve().ok_or_else(|| {
                Error::Internal(format!(
                    "the curve check named point {} of {section} off the curve; blst finds \
                     it on the curve",
                    k * run + index
                ))
            })?,
            Invalid::Outside => "on the curve but not in the prime-order subgroup",
        };
        return Err(Error::ParamsInvalidPoint {
            section,
            index: k * run + index,
            reason: reason.into(),
        });
    }
    Ok(())
}

/// What ends a read's wait for its points to be vouched for.
enum Finished {
    /// The points checked (or the checks stopped: the published digest came first).
    Checked(Result<()>),
    /// The published digest's hash, `None` where it stopped or could not read the file.
    Hashed(Option<InOrder>),
}

/// Sets the flag when dropped: whatever way a read ends, its hashing thread stops.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A file's BLAKE2b-512, computed in order over private copies of its runs of points, and
/// those copies' section digests.
struct InOrder {
    blake2b: blake2b_simd::Hash,
    sections: Vec<blake3::Hash>,
    seconds: f64,
}

impl InOrder {
    /// Whether the file is the one published as `expected`: its BLAKE2b starts with it, and
    /// the copies' section digests are `digests`, those of the points decoded (so the points
    /// are the bytes the published digest covers, even if the file changed meanwhile).
    fn matches(&self, expected: &[u8; PUBLISHED_DIGEST_BYTES], digests: &[blake3::Hash]) -> bool {
        self.blake2b.as_bytes()[..PUBLISHED_DIGEST_BYTES] == expected[..]
            && self.sections == digests
    }

    fn log(&self, path: &Path, bytes: u64, matches: bool) {
        let gib = bytes as f64 / (1u64 << 30) as f64;
        let hashed = format!(
            "{gib:.2} GiB hashed in {:.2} s, {:.2} GiB/s, beside the decode",
            self.seconds,
            gib / self.seconds
        );
        match matches {
            true => log::info!(
                "{}: the published digest ({hashed}): its points are the setup's, not checked",
                path.display()
            ),
            false => log::warn!(
                "{}: not the published digest for its name ({hashed}): every point is checked",
                path.display()
            ),
        }
    }
}

/// [`InOrder`] of the file cut into `sections`; `None` once `stop` is set or where the file
/// cannot be read.
fn hash_published(sections: &Sections<'_, ParamsFile>, stop: &AtomicBool) -> Option<InOrder> {
    let start = Instant::now();
    let (source, parts) = (sections.source, &sections.parts);
    let mut whole = blake2b_simd::State::new();
    // The bytes between the hashed sections (the verifying key, the counts), read whole.
    let between = |whole: &mut blake2b_simd::State, bytes: Range<u64>| -> Option<()> {
        let mut between = vec![0; (bytes.end - bytes.start) as usize];
        source.read_at(bytes.start, &mut between).ok()?;
        whole.update(&between);
        Some(())
    };
    let mut at = 0;
    let mut in_order = Vec::with_capacity(5);
    for (name, range) in [
        ("h", &parts.h),
        ("l", &parts.l),
        ("a", &parts.a),
        ("b_g1", &parts.b_g1),
    ] {
        between(&mut whole, at..range.start)?;
        at = range.end;
        in_order.push(hash_in_order::<G1Affine, _>(
            name, source, range, &mut whole, stop,
        )?);
    }
    between(&mut whole, at..parts.b_g2.start)?;
    in_order.push(hash_in_order::<G2Affine, _>(
        "b_g2",
        source,
        &parts.b_g2,
        &mut whole,
        stop,
    )?);
    Some(InOrder {
        blake2b: whole.finalize(),
        sections: in_order,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// What finds the points off the curve or outside their prime-order subgroups when a
/// parameter file's points are checked: the CPU ([`CpuCurveCheck`]) or a GPU's kernels
/// ([`GpuCurveCheck`](crate::subgroup::GpuCurveCheck)).
pub trait CurveCheck: Sync {
    /// The first point off the curve (as blst's deserializer finds it), or where all are on
    /// it, the first outside the prime-order subgroup.
    fn first_invalid_g1(&self, points: &[G1Affine]) -> Result<Option<(usize, Invalid)>>;
    fn first_invalid_g2(&self, points: &[G2Affine]) -> Result<Option<(usize, Invalid)>>;
    /// Where the checks run, for logs.
    fn describe(&self) -> String;
}

/// Why a [`CurveCheck`] names a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Invalid {
    /// Not on the curve, as blst's deserializer finds it.
    OffCurve,
    /// On the curve, outside the prime-order subgroup.
    Outside,
}

/// blst's checks on every core.
pub struct CpuCurveCheck;

fn first_invalid_on_cpu<P: FilePoint>(points: &[P]) -> Option<(usize, Invalid)> {
    let first =
        |invalid: fn(&P) -> bool| points.par_iter().with_min_len(1024).position_first(invalid);
    first(|p| p.off_curve().is_some())
        .map(|index| (index, Invalid::OffCurve))
        .or_else(|| first(|p| !p.on_curve_in_subgroup()).map(|index| (index, Invalid::Outside)))
}

impl CurveCheck for CpuCurveCheck {
    fn first_invalid_g1(&self, points: &[G1Affine]) -> Result<Option<(usize, Invalid)>> {
        Ok(first_invalid_on_cpu(points))
    }

    fn first_invalid_g2(&self, points: &[G2Affine]) -> Result<Option<(usize, Invalid)>> {
        Ok(first_invalid_on_cpu(points))
    }

    fn describe(&self) -> String {
        format!("on the CPU ({} threads)", rayon::current_num_threads())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs of points are checked with their offset in the section: a bad point in a later
    /// run is named by its index in the section, with blst's reason where it is off the
    /// curve; a check that names a point blst finds on the curve is an error of its own; a
    /// stop before a run ends the checks there.
    #[test]
    fn check_runs_name_points_by_their_index_in_the_section() {
        use group::{Curve, Group};
        let points: Vec<G1Affine> = (1..=10u64)
            .map(|k| (G1Projective::generator() * blstrs::Scalar::from(k)).to_affine())
            .collect();
        let mut off = points.clone();
        off[7] = G1Affine::from_raw_unchecked(points[7].y(), points[7].x(), false);
        let outside = points[8];
        let check = |run: &[G1Affine]| CpuCurveCheck.first_invalid_g1(run);
        let outside_at_8 = |run: &[G1Affine]| -> Result<Option<(usize, Invalid)>> {
            Ok(check(run)?.or_else(|| {
                let index = run.iter().position(|p| *p == outside)?;
                Some((index, Invalid::Outside))
            }))
        };
        let go = AtomicBool::new(false);
        let named = |result: Result<()>| match result {
            Err(Error::ParamsInvalidPoint { index, reason, .. }) => Some((index, reason)),
            _ => None,
        };
        let (index, reason) = named(check_runs("h", &off, 3, &go, outside_at_8)).unwrap();
        assert_eq!((index, reason.as_str()), (7, "not on the curve"));
        let (index, reason) = named(check_runs("h", &points, 3, &go, outside_at_8)).unwrap();
        assert_eq!(index, 8);
        assert!(reason.contains("subgroup"), "{reason}");
        assert!(check_runs("h", &points, 3, &AtomicBool::new(true), outside_at_8).is_ok());
        let (index, reason) = named(check_runs("h", &off, 3, &go, check)).unwrap();
        assert_eq!((index, reason.as_str()), (7, "not on the curve"));
        let wrongly_off = |run: &[G1Affine]| Ok(Some((run.len() - 1, Invalid::OffCurve)));
        let err = check_runs("h", &points, 3, &go, wrongly_off).unwrap_err();
        assert!(matches!(err, Error::Internal(_)), "{err:?}");
        let past_the_run = |run: &[G1Affine]| Ok(Some((run.len(), Invalid::Outside)));
        let err = check_runs("h", &points, 3, &go, past_the_run).unwrap_err();
        assert!(matches!(err, Error::Internal(_)), "{err:?}");
    }

    /// A file cut short after it was opened (another process truncating it, or rewriting it
    /// in place) fails the read that meets the cut with an error naming it; a memory map
    /// would have taken the process down with SIGBUS there.
    #[test]
    fn a_file_truncated_while_it_is_read_is_an_error_not_a_crash() {
        let shape = Shape {
            constraints: 3000,
            inputs: 2,
            aux: 2500,
            a_aux_density: 2400,
            b_input_density: 1,
            b_aux_density: 600,
        };
        let mut bytes = Vec::new();
        ProvingParameters::random_for_shape(&shape, 7)
            .write(&mut bytes)
            .unwrap();
        let path = std::env::temp_dir().join(format!(
            "wgpu-groth16-truncated-while-read-{}.params",
            std::process::id()
        ));
        type Read<'a> = &'a dyn Fn(&ParamsFile) -> Result<()>;
        let reads: [Read; 3] = [
            &|file| ProvingParameters::from_source(file, PointCheck::Unchecked).map(drop),
            &|file| {
                ProvingParameters::read_checked_once_from(
                    file,
                    &path,
                    &CheckRecords::none(),
                    &CpuCurveCheck,
                )
                .map(drop)
            },
            &|file| {
                hash_section::<G1Affine, _>("l", file, &Sections::split(file)?.parts.l).map(drop)
            },
        ];
        for read in reads {
            std::fs::write(&path, &bytes).unwrap();
            let file = ParamsFile::open(&path).unwrap();
            let cut = file.len() * 2 / 3;
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(cut)
                .unwrap();
            let err = read(&file).unwrap_err();
            assert!(matches!(err, Error::ParamsIo { .. }), "{err:?}");
            assert!(
                err.to_string()
                    .contains("was truncated or rewritten while it was read"),
                "{err}"
            );
        }
        std::fs::remove_file(&path).unwrap();
    }
}
