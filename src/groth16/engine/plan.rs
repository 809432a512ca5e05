//! What a parameter set's proofs keep on one device and what they stream, within the
//! engine's VRAM budget: one plan, made by the GPU engine (`GpuEngine::keep_resident`), asked
//! for by the prover. Pure arithmetic over the sizes the kernels report, tested without a GPU.
//!
//! The budget goes, in this order, to what every proof needs (the MSM workspaces, the NTT's
//! power tables, and two buffers per curve to stream bases through when some do not fit; the
//! MSM chunk sets their size, and where even the smallest chunk leaves no room for one proof,
//! a cap on the bucket arrays: narrower windows), to one proof's buffers (the largest of
//! [`ProofBuffers`] that fit) with the constraint matrices where they are known and fit
//! beside the scalars, to the bases (h first: its MSM is the full-width one, then l, a, b_g1,
//! b_g2, each as long a prefix as fits, the rest streamed), and last to more proofs in
//! flight. Matrices not known to the plan take what is left when they arrive
//! ([`DevicePlan::room_with`]).
//!
//! The matrices come before the bases: on the device they take a 2^27 proof's products
//! and its A and B selection off the CPU (1.4-2.6 s and 3.8-4.4 s a proof on the H200's 16
//! cores, docs/benchmarks/vram-budgets.md), where the same bytes of bases save their upload
//! (~0.25 s for 7 GB at the ~29 GB/s measured there).

use crate::curve::{GpuCurve, G1, G2};
use crate::msm::{kept_bytes, MsmLimits, MsmPlan, CHUNK_ALIGN};
use crate::{Error, Result};

/// The device bytes a parameter set's proofs are made of, as the kernels of one device
/// report them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Footprint {
    /// One vector of the H step's domain (a, b and c each take one).
    pub domain_vector: u64,
    /// The L, A and B scalar vectors of one proof. A and B are made after the H step and
    /// the H MSM, in the room a, b and c leave.
    pub scalar_vectors: [u64; 3],
    /// The H step in parts: one domain vector and one of its parts.
    pub h_in_parts: u64,
    /// The bases of each set in [`BASE_SETS`] order: (points, bytes of one point).
    pub bases: [(usize, u64); 5],
    /// The MSM limits to choose from, in the order [`ChunkOption::preferred`] gives. The
    /// last keeps the least.
    pub chunks: Vec<ChunkOption>,
    /// The constraint matrices the proofs' products and A, B gathers read on the device,
    /// where known when the plan is made (0: not known).
    pub matrices: u64,
    /// The buffers those matrices stream through where they are not resident (0: matrices
    /// not known).
    pub matrix_stream: u64,
}

impl Footprint {
    /// One proof's buffers with its scalars on the device: a, b, c and the L scalars, then
    /// L, A and B.
    pub fn resident_proof(&self) -> u64 {
        let [l, a, b] = self.scalar_vectors;
        (3 * self.domain_vector + l).max(l + a + b)
    }

    /// [`ProofBuffers::ProductsInPairs`]: the L scalars and two of a, b, c (or, for a proof
    /// whose a, b, c come from the host, one and a part of another: the H step in parts),
    /// then L, A and B.
    pub fn paired_proof(&self) -> u64 {
        let [l, a, b] = self.scalar_vectors;
        (2 * self.domain_vector + l).max(l + a + b)
    }

    /// [`ProofBuffers::ProductsInParts`]: the L scalars (the aux values) beside one product
    /// at a time, then the H step in parts alone (the aux values leave the device for it),
    /// then the L scalars beside h, the A scalars, then the B scalars.
    pub fn parted_proof(&self) -> u64 {
        let [l, a, b] = self.scalar_vectors;
        (l + self.domain_vector.max(a).max(b)).max(self.h_in_parts)
    }

    /// The most a proof of `mode` holds once past its H step: h's vector beside the L
    /// scalars, then the A and B scalars beside them (one at a time where its products are
    /// in parts); with the scalars on the host, h's vector alone.
    pub fn after_h_step(&self, mode: ProofBuffers) -> u64 {
        let [l, a, b] = self.scalar_vectors;
        let h = self.domain_vector;
        match mode {
            ProofBuffers::Resident | ProofBuffers::ProductsInPairs => l + h.max(a + b),
            ProofBuffers::ProductsInParts => l + h.max(a).max(b),
            ProofBuffers::ScalarsStreamed | ProofBuffers::HInParts => h,
        }
    }

    /// Bytes of every base.
    pub fn bases_bytes(&self) -> u64 {
        self.bases
            .iter()
            .map(|&(points, bytes)| points as u64 * bytes)
            .sum()
    }
}

/// One MSM chunk size and what it keeps on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkOption {
    /// Points of one MSM chunk of G1 and of G2.
    pub points: [usize; 2],
    /// Cap on the bytes of an MSM's bucket array (`u64::MAX`: the widest windows).
    pub bucket_bytes: u64,
    /// The MSM workspaces at that size and the NTT's power tables, kept while the engine
    /// lives.
    pub kept: u64,
    /// Bytes of one bucket array of the longest G1 MSM at that size.
    pub g1_buckets: u64,
}

/// Chunks of at least this many points are large: below it, halving the chunk is taken to
/// cost an MSM more than narrowing its windows by a bit (on the H200 at 2^27, the L and A
/// MSMs took 2.0 s with 161,280-point chunks and the widest windows, 1.0 s with 645,120-point
/// ones and narrower windows, and 19,968-point chunks took a proof 60 s; windows of c bits
/// narrowed by one add about 1/c more additions, by arithmetic, not measured).
pub const LARGE_CHUNK: usize = 1 << 20;

impl ChunkOption {
    /// `options` in the order a plan prefers them: `per_chunk` holds for each chunk size,
    /// largest first, its options from the widest windows to the narrowest. Large chunks
    /// (`LARGE_CHUNK`) first, wider windows before larger chunks; then the smaller
    /// chunks, larger chunks before wider windows.
    pub fn preferred(per_chunk: Vec<Vec<ChunkOption>>) -> Vec<ChunkOption> {
        let (large, small): (Vec<_>, Vec<_>) = per_chunk
            .into_iter()
            .partition(|options| options.first().is_some_and(|o| o.points[0] >= LARGE_CHUNK));
        let caps = large.iter().map(Vec::len).max().unwrap_or(0);
        let mut ordered: Vec<ChunkOption> = (0..caps)
            .flat_map(|cap| large.iter().filter_map(move |options| options.get(cap)))
            .copied()
            .collect();
        ordered.extend(small.into_iter().flatten());
        ordered
    }
}

/// The smallest MSM chunk a plan chooses: smaller ones add passes for little room.
const SMALLEST_CHUNK: usize = 1 << 14;

/// The MSM chunk options of a parameter set's proofs, in the order plans prefer them
/// ([`ChunkOption::preferred`]): the MSMs' own chunks, then halves of them down to
/// [`SMALLEST_CHUNK`]; each with the widest windows, then with bucket arrays capped at halves
/// of the widest windows' down to the narrowest windows (the windows' buckets are the same at
/// every chunk size: at 2^27 they alone kept an 8 GiB budget from holding one proof).
/// `g1_lens` are the lengths of the G1 MSMs (h, l, a, b_g1), `tables` the NTT's power tables;
/// `plan_g1` and `plan_g2` plan one MSM of a curve within limits, as its kernels would.
///
/// A G2 chunk holds the bytes of a G1 chunk (half its points): a G2 point and its bucket
/// take twice a G1 one's bytes, and at 2^27 G2 workspaces of G1's points kept pairs of
/// vectors out of 16 GiB (H200, f7cf9ba).
pub fn chunk_options(
    g1_lens: [usize; 4],
    g2_len: usize,
    tables: u64,
    plan_g1: impl Fn(usize, MsmLimits) -> Result<MsmPlan>,
    plan_g2: impl Fn(usize, MsmLimits) -> Result<MsmPlan>,
) -> Result<Vec<ChunkOption>> {
    let g1_len = g1_lens.into_iter().max().unwrap_or(0);
    // One chunk option and the bytes of its widest bucket array (G1's or G2's).
    let measure = |limits: MsmLimits| -> Result<(ChunkOption, u64)> {
        let g2_limits = MsmLimits {
            chunk_points: limits.chunk_points.saturating_mul(G1::AFFINE_BYTES) / G2::AFFINE_BYTES,
            ..limits
        };
        let g1 = plan_g1(g1_len.max(1), limits)?;
        let g2 = plan_g2(g2_len.max(1), g2_limits)?;
        let g1_plans = g1_lens
            .iter()
            .filter(|&&len| len > 0)
            .map(|&len| plan_g1(len, limits))
            .collect::<Result<Vec<_>>>()?;
        let option = ChunkOption {
            points: [g1.chunk, g2.chunk],
            bucket_bytes: limits.bucket_bytes,
            kept: kept_bytes(&g1_plans, G1::XYZZ_BYTES as u64)
                + g2.workspace_bytes(G2::XYZZ_BYTES as u64)
                + tables,
            g1_buckets: g1.layout.total_buckets() * G1::XYZZ_BYTES as u64,
        };
        let buckets = (g1.layout.total_buckets() * G1::XYZZ_BYTES as u64)
            .max(g2.layout.total_buckets() * G2::XYZZ_BYTES as u64);
        Ok((option, buckets))
    };
    let mut widest = vec![measure(MsmLimits::NONE)?];
    loop {
        let points = widest[widest.len() - 1].0.points[0] / 2;
        if points < SMALLEST_CHUNK {
            break;
        }
        widest.push(measure(MsmLimits::chunks_of(points))?);
    }
    let mut per_chunk = Vec::new();
    for (option, widest_buckets) in widest {
        let mut options = vec![option];
        // Each curve takes its narrowest windows under a cap below them: only caps that
        // shrink what is kept are options.
        let mut bucket_bytes = widest_buckets / 2;
        while bucket_bytes > 0 {
            let (narrower, _) = measure(MsmLimits {
                chunk_points: option.points[0],
                bucket_bytes,
            })?;
            if narrower.kept < options[options.len() - 1].kept {
                options.push(narrower);
            }
            bucket_bytes /= 2;
        }
        per_chunk.push(options);
    }
    Ok(ChunkOption::preferred(per_chunk))
}

/// The MSM workspaces and stream buffers take at most this share of the budget (a quarter)
/// where a smaller chunk allows: the rest is for proofs and bases.
const WORKSPACE_SHARE: u64 = 4;

/// Where one proof's vectors are, from the most device memory to the least.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProofBuffers {
    /// a, b, c and the L, A, B scalar vectors on the device.
    Resident,
    /// a, b, c on the device; the L, A, B scalars streamed from host memory with each MSM
    /// chunk.
    ScalarsStreamed,
    /// One of a, b, c on the device at a time, and a part of another (the H step in parts);
    /// the scalars streamed.
    HInParts,
    /// The constraint matrices and the L, A, B scalars on the device, the products and the
    /// H step two vectors at a time (A·z and B·z to the coset and their product, then C·z
    /// in b's room): for budgets where the matrices do not fit beside three vectors. A
    /// proof whose a, b, c come from the host takes the H step in parts.
    ProductsInPairs,
    /// The constraint matrices and the L scalars on the device, the products written there
    /// for the H step in parts (the L scalars, the aux values, off the device meanwhile and
    /// uploaded again after it), then the A and B scalars gathered there one after the
    /// other: for budgets where two vectors do not fit beside the L scalars.
    ProductsInParts,
}

impl ProofBuffers {
    /// Whether the products run on the device inside the H step (the plan needs the
    /// matrices there).
    pub fn products_on_device(self) -> bool {
        matches!(
            self,
            ProofBuffers::ProductsInPairs | ProofBuffers::ProductsInParts
        )
    }
}

/// The base sets in the order they are kept resident.
pub const BASE_SETS: [&str; 5] = ["h", "l", "a", "b_g1", "b_g2"];

/// The plan: what is resident, what streams, how many proofs are in flight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DevicePlan {
    pub budget: u64,
    /// Resident points of each base set ([`BASE_SETS`] order): a prefix, the rest streamed.
    pub resident_points: [usize; 5],
    /// Points per MSM chunk of G1 and of G2, streamed or not.
    pub chunk_points: [usize; 2],
    /// Cap on the bytes of an MSM's bucket array (`u64::MAX`: none).
    pub bucket_bytes: u64,
    /// Whether G1's and G2's MSMs stream bases (two buffers of a chunk each).
    pub streams: [bool; 2],
    /// Whether a proof's G1 MSMs run two at a time, H's with L's and A's with B's, chunk by
    /// chunk in turn, so that one's upload runs beside the other's kernels: where G1's
    /// bases stream and the room holds a second bucket array and pair of stream buffers.
    pub g1_together: bool,
    /// Where each proof's vectors are.
    pub proof: ProofBuffers,
    /// Proofs in flight at once.
    pub proofs_in_flight: usize,
    /// Bytes of the MSM workspaces, power tables and stream buffers.
    pub kept_bytes: u64,
    /// Bytes of one proof's buffers.
    pub proof_bytes: u64,
    /// Bytes of those a proof no longer needs once past its H step: the room in which
    /// the next proof stages ahead, beside it (`Prover::workers`).
    pub ahead_bytes: u64,
    /// Bytes set aside for the constraint matrices (0: none planned).
    pub matrices_bytes: u64,
    /// Whether those bytes are the buffers the matrices stream through.
    pub matrices_streamed: bool,
    /// Bytes of the resident bases.
    pub resident_bytes: u64,
}

impl DevicePlan {
    /// The plan for `footprint` within `budget` bytes, with at most `workers` proofs in
    /// flight. [`Error::VramBudget`] when not even one proof with every base streamed fits.
    pub fn new(footprint: &Footprint, budget: u64, workers: usize) -> Result<Self> {
        Self::with_bases(footprint, budget, workers, true, true)
    }

    /// [`new`](Self::new), keeping no base resident unless `keep_bases`, and G1 MSMs two at a
    /// time only if `allow_together`.
    pub fn with_bases(
        footprint: &Footprint,
        budget: u64,
        workers: usize,
        keep_bases: bool,
        allow_together: bool,
    ) -> Result<Self> {
        let smallest = footprint
            .chunks
            .last()
            .ok_or_else(|| Error::Internal("no MSM chunk size to plan with".into()))?;
        let abc = 3 * footprint.domain_vector;
        let resident_proof = footprint.resident_proof();
        let (paired, parted) = (footprint.paired_proof(), footprint.parted_proof());
        let everything = resident_proof + footprint.matrices + footprint.bases_bytes();
        let stream_bytes = |chunk: &ChunkOption| {
            let point = |set: usize| footprint.bases[set].1;
            [
                2 * chunk.points[0] as u64 * point(0),
                2 * chunk.points[1] as u64 * point(4),
            ]
        };
        let kept_with_streams =
            |option: &ChunkOption| option.kept + stream_bytes(option).iter().sum::<u64>();
        let large_chunk = LARGE_CHUNK.min(footprint.chunks[0].points[0]);
        // The largest buffers of which one proof fits with the matrices, resident and then
        // streamed (their products and gathers on the device cost a proof the upload of
        // their bytes, the CPU's seconds more), then without them. (Reserving two proofs in flight with smaller
        // buffers instead was slower: docs/benchmarks/vram-budgets.md, 8fec278.)
        let (matrices, stream) = (footprint.matrices, footprint.matrix_stream);
        let modes = [
            (ProofBuffers::Resident, resident_proof, matrices, false),
            (ProofBuffers::ProductsInPairs, paired, matrices, false),
            (ProofBuffers::Resident, resident_proof, stream, true),
            (ProofBuffers::ProductsInPairs, paired, stream, true),
            (ProofBuffers::ProductsInParts, parted, matrices, false),
            (ProofBuffers::ProductsInParts, parted, stream, true),
            (ProofBuffers::Resident, resident_proof, 0, false),
            (ProofBuffers::ScalarsStreamed, abc, 0, false),
            (ProofBuffers::HInParts, footprint.h_in_parts, 0, false),
        ];
        // Everything resident at the largest chunks where it fits. Else the largest proof
        // buffers beside which some option fits, and of those options the largest large
        // chunk with the widest windows whose workspaces and stream buffers take a quarter of
        // the budget at most (the rest keeps bases), else the first that fits: a large chunk
        // with the widest windows that fit there, before any small chunk (at 12 GiB and 2^27,
        // 322,560-point chunks with the widest windows took the MSMs 1.4x the time of
        // 1,290,496-point ones with narrower windows: H200, f7cf9ba).
        let everything_fits = keep_bases
            .then(|| {
                footprint
                    .chunks
                    .iter()
                    .find(|option| option.kept + everything <= budget)
            })
            .flatten();
        // G1 MSMs two at a time (`g1_together`) take a bucket array and a pair of stream
        // buffers more: where some G1 base streams, a plan takes the largest chunks that
        // leave room for them, else plans without.
        let together_bytes = |option: &ChunkOption| option.g1_buckets + stream_bytes(option)[0];
        let g1_bases: u64 = footprint.bases[..4]
            .iter()
            .map(|&(points, bytes)| points as u64 * bytes)
            .sum();
        let (
            chunk,
            kept_streaming,
            g1_together,
            (proof, proof_bytes, matrices_bytes, matrices_streamed),
        ) = match everything_fits {
            // Where everything fits nothing streams: no stream buffers to set aside.
            Some(chunk) => (chunk, chunk.kept, false, modes[0]),
            None => modes
                .iter()
                .filter(|&&(mode, _, matrices_bytes, streamed)| {
                    // Matrices only where known; the products on the device need them.
                    let known = matrices > 0 && matrices_bytes > 0;
                    known || (!streamed && !mode.products_on_device())
                })
                .find_map(|&mode @ (_, proof_bytes, matrices, _)| {
                    let bytes = proof_bytes + matrices;
                    let choose = |together: bool| {
                        let kept = |option: &ChunkOption| {
                            kept_with_streams(option) + u64::from(together) * together_bytes(option)
                        };
                        // Matrices only beside large chunks (or the MSM's own, where
                        // smaller): at 24 GiB they left 80,640-point chunks, and the MSMs
                        // of a 2^27 proof took 14 s against 4.3 s with 1,290,496-point
                        // chunks at 32 GiB (H200, 675a7e2). MSMs together only beside
                        // large chunks too.
                        let fits = |option: &&ChunkOption| {
                            kept(option) + bytes <= budget
                                && (matrices == 0 && !together || option.points[0] >= large_chunk)
                        };
                        let mut fitting = footprint.chunks.iter().filter(fits);
                        fitting
                            .clone()
                            .filter(|option| {
                                option.bucket_bytes == u64::MAX && option.points[0] >= large_chunk
                            })
                            .find(|option| kept(option) <= budget / WORKSPACE_SHARE)
                            .or_else(|| fitting.next())
                            .map(|chunk| (chunk, kept(chunk), together, mode))
                    };
                    // Only where more of G1's bases stream than the MSMs together would
                    // take room from (else that room keeps them resident).
                    let alone = choose(false)?;
                    let room = match keep_bases {
                        true => budget - alone.1 - bytes,
                        false => 0,
                    };
                    let streaming = g1_bases.saturating_sub(room);
                    let together = allow_together
                        .then(|| choose(true))
                        .flatten()
                        .filter(|t| together_bytes(t.0) < streaming);
                    Some(together.unwrap_or(alone))
                })
                .ok_or_else(|| Error::VramBudget {
                    what: "one proof at its smallest (one of the H step's a, b, c and a \
                               part of another, the MSM workspaces and power tables, two \
                               chunks of streamed bases per curve)"
                        .into(),
                    needed: kept_with_streams(smallest) + footprint.h_in_parts,
                    budget,
                })?,
        };
        let [g1_bytes, g2_bytes] = stream_bytes(chunk);
        let mut left = budget - kept_streaming - proof_bytes - matrices_bytes;
        let mut resident_points = [0; 5];
        for (resident, &(points, point_bytes)) in resident_points.iter_mut().zip(&footprint.bases) {
            let fitting = match keep_bases {
                true => (left / point_bytes.max(1)) as usize,
                false => 0,
            };
            *resident = if fitting >= points {
                points
            } else {
                fitting - fitting % CHUNK_ALIGN as usize
            };
            left -= *resident as u64 * point_bytes;
        }
        let streams = |sets: &[usize]| {
            sets.iter()
                .any(|&set| resident_points[set] < footprint.bases[set].0)
        };
        let streams = [streams(&[0, 1, 2, 3]), streams(&[4])];
        // Only a curve whose bases stream keeps its stream buffers.
        let kept_bytes = chunk.kept
            + u64::from(streams[0]) * g1_bytes
            + u64::from(streams[1]) * g2_bytes
            + u64::from(g1_together) * together_bytes(chunk);
        let resident_bytes: u64 = resident_points
            .iter()
            .zip(&footprint.bases)
            .map(|(&points, &(_, bytes))| points as u64 * bytes)
            .sum();
        let left = budget - kept_bytes - resident_bytes - matrices_bytes - proof_bytes;
        let more = 1 + (left / proof_bytes.max(1)) as usize;
        Ok(DevicePlan {
            budget,
            resident_points,
            chunk_points: chunk.points,
            bucket_bytes: chunk.bucket_bytes,
            streams,
            g1_together,
            proof,
            proofs_in_flight: workers.max(1).min(more),
            kept_bytes,
            proof_bytes,
            ahead_bytes: proof_bytes.saturating_sub(footprint.after_h_step(proof)),
            matrices_bytes,
            matrices_streamed,
            resident_bytes,
        })
    }

    /// Bytes of the budget nothing in the plan takes with `proofs` in flight, the room set
    /// aside for constraint matrices included (for the matrices).
    pub fn room_with(&self, proofs: usize) -> u64 {
        self.budget.saturating_sub(
            self.kept_bytes + self.resident_bytes + self.proof_bytes * proofs as u64,
        )
    }

    /// "budget N MiB".
    pub fn describe_budget(&self) -> String {
        format!("budget {} MiB", self.budget >> 20)
    }

    /// Whether the L, A, B scalars are in device vectors (else streamed from the host).
    pub fn scalars_on_device(&self) -> bool {
        matches!(
            self.proof,
            ProofBuffers::Resident | ProofBuffers::ProductsInPairs | ProofBuffers::ProductsInParts
        )
    }

    /// Device bytes a proof's staging takes: the L scalars (the aux values) where they are
    /// on the device, and a, b, c where the proof brings them from the host (its products
    /// not `deferred` to the device or the CPU) and the H step takes them whole.
    pub fn staged_bytes(&self, footprint: &Footprint, deferred: bool) -> u64 {
        let l = match self.scalars_on_device() {
            true => footprint.scalar_vectors[0],
            false => 0,
        };
        let abc = match deferred || self.h_in_parts() || self.products_with_h() {
            true => 0,
            false => 3 * footprint.domain_vector,
        };
        l + abc
    }

    /// Whether the next proof of a recorded system stages ahead, in the room a proof leaves
    /// once past its H step: where its staging takes device memory, and fits there.
    pub fn stages_ahead(&self, footprint: &Footprint) -> bool {
        let staged = self.staged_bytes(footprint, true);
        staged > 0 && staged <= self.ahead_bytes
    }

    /// Whether the products run on the device inside the H step, which holds two vectors at
    /// a time or (where [`h_in_parts`](Self::h_in_parts)) one and a part.
    pub fn products_with_h(&self) -> bool {
        self.proof.products_on_device()
    }

    /// Whether the H step holds one of a, b, c on the device at a time.
    pub fn h_in_parts(&self) -> bool {
        matches!(
            self.proof,
            ProofBuffers::HInParts | ProofBuffers::ProductsInParts
        )
    }

    /// Whether a proof's B G2 MSM runs beside its A and B G1 MSMs: where G2's bases stream
    /// (its time is then their upload) and the proof holds both queries' scalars at once
    /// (every mode but [`ProofBuffers::ProductsInParts`], which gathers one at a time).
    pub fn g2_beside_g1(&self) -> bool {
        self.streams[1] && self.proof != ProofBuffers::ProductsInParts
    }

    /// Whether every base is resident.
    pub fn all_resident(&self, footprint: &Footprint) -> bool {
        self.streams == [false, false]
            && self
                .resident_points
                .iter()
                .zip(&footprint.bases)
                .all(|(&resident, &(points, _))| resident == points)
    }

    /// One line: "bases resident (58,368 MiB), scalars on the device, 2 proofs in flight,
    /// budget 131,072 MiB" or what streams.
    pub fn describe(&self, footprint: &Footprint) -> String {
        let mib = |bytes: u64| bytes >> 20;
        let bases = if self.all_resident(footprint) {
            format!("bases resident ({} MiB)", mib(self.resident_bytes))
        } else {
            let sets: Vec<String> = BASE_SETS
                .iter()
                .zip(self.resident_points.iter().zip(&footprint.bases))
                .map(|(name, (&resident, &(points, _)))| match resident {
                    r if r == points => format!("{name} resident"),
                    0 => format!("{name} streamed"),
                    r => format!("{name} {}% resident", r * 100 / points.max(1)),
                })
                .collect();
            format!(
                "bases {} ({} MiB resident)",
                sets.join(", "),
                mib(self.resident_bytes),
            )
        };
        let scalars = match self.proof {
            ProofBuffers::Resident => "a, b, c and the scalars on the device",
            ProofBuffers::ScalarsStreamed => {
                "a, b, c on the device, scalars streamed from the host"
            }
            ProofBuffers::HInParts => "the H step in parts, scalars streamed from the host",
            ProofBuffers::ProductsInPairs => {
                "the products and the H step two vectors at a time, the scalars on the device"
            }
            ProofBuffers::ProductsInParts => {
                "the products on the device and the H step in parts, the scalars on the device \
                 one query at a time"
            }
        };
        let buckets = match self.bucket_bytes {
            u64::MAX => String::new(),
            cap => format!(" (buckets within {} MiB: narrower windows)", mib(cap)),
        };
        // Known matrices without room set aside still go to the device at their first
        // proof if the room the plan leaves holds them (`Prover::device_matrices`).
        let matrices = match (self.matrices_bytes, footprint.matrices) {
            (0, 0) => String::new(),
            (0, known) => format!(
                ", no room set aside for the constraint matrices ({} MiB)",
                mib(known)
            ),
            (bytes, known) if self.matrices_streamed => format!(
                ", the constraint matrices ({} MiB) streamed through {} MiB",
                mib(known),
                mib(bytes)
            ),
            (bytes, _) => format!(", room for the constraint matrices ({} MiB)", mib(bytes)),
        };
        let together = match self.g1_together {
            true => ", G1 MSMs two at a time (H with L, A with B)",
            false => "",
        };
        // What nothing planned takes: whether one more proof's staged vectors would fit.
        let spare = self
            .room_with(self.proofs_in_flight)
            .saturating_sub(self.matrices_bytes);
        let ahead = match self.stages_ahead(footprint) {
            true => ", the next staging ahead once one passes its H step",
            false => "",
        };
        format!(
            "{bases}, {scalars}{matrices}, MSM chunks of {} G1 and {} G2 points{buckets}\
             {together}, {} proof(s) in flight ({} MiB spare){ahead}, {}",
            self.chunk_points[0],
            self.chunk_points[1],
            self.proofs_in_flight,
            mib(spare),
            self.describe_budget()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    /// The shape of a 2^27 proof on the H200, near enough: 4 GiB vectors, 12 GiB of G1
    /// bases per set, 24 GiB of G2 bases; workspaces of ~140 bytes a chunk point beside
    /// three bucket arrays of 1 GiB at the widest windows (two G1 workspaces, one G2), then
    /// each chunk with capped ones; tables 0.25 GiB.
    fn shape_2_27() -> Footprint {
        let n = 1usize << 27;
        let option = |bits: u32, bucket_bytes: u64| ChunkOption {
            points: [1 << bits, 1 << (bits - 1)],
            bucket_bytes,
            kept: (420 << bits) + 3 * bucket_bytes.min(GIB) + GIB / 4,
            g1_buckets: bucket_bytes.min(GIB),
        };
        let chunks = ChunkOption::preferred(
            (16..=24)
                .rev()
                .map(|chunk| {
                    let capped = (24..30).rev().map(|cap| option(chunk, 1 << cap));
                    std::iter::once(option(chunk, u64::MAX))
                        .chain(capped)
                        .collect()
                })
                .collect(),
        );
        Footprint {
            domain_vector: 4 * GIB,
            scalar_vectors: [4 * GIB; 3],
            h_in_parts: 5 * GIB,
            bases: [(n, 96), (n, 96), (n, 96), (n / 2, 96), (n / 2, 192)],
            chunks,
            matrices: 0,
            matrix_stream: 0,
        }
    }

    /// The 2^27 shape as the MSM plans of the H200 size it (SHADER_INT64, bindings of 2
    /// GiB less 4 bytes: the H step in parts holds one vector and a part of 2 GiB), with the
    /// constraint matrices of FilecoinLike at 2^27 (6,399 MiB, streamed through 256 MiB).
    fn shape_2_27_planned() -> Footprint {
        use crate::field::GpuField;
        use crate::gpu::WideMul;
        use crate::msm::{MsmConfig, PointCosts};
        fn planner<C: GpuCurve>(loop_trips: u32) -> impl Fn(usize, MsmLimits) -> Result<MsmPlan> {
            let costs = PointCosts::new(C::AFFINE_BYTES as u64, C::XYZZ_BYTES as u64, loop_trips)
                .with_bucket_cost(C::BUCKET_COST);
            move |n, limits| {
                let config = MsmConfig {
                    max_chunk_points: Some(limits.chunk_points),
                    max_bucket_bytes: Some(limits.bucket_bytes),
                    segment: Some(C::SEGMENT),
                    ..MsmConfig::default()
                };
                MsmPlan::new(n, costs, 2 * GIB - 4, &config)
            }
        }
        let n = 1usize << 27;
        // The NTT's tables at 2^27 with 2^21-entry high parts (ntt::tables' table_bytes).
        let tables = (4 * ((1 << 21) + (1 << 6)) + 2) * 32;
        let chunks = chunk_options(
            [n - 1, n, n, n / 2],
            n / 2,
            tables,
            planner::<G1>(blstrs::Fp::mul_loop_trips(WideMul::Int64)),
            planner::<G2>(blstrs::Fp2::mul_loop_trips(WideMul::Int64)),
        )
        .unwrap();
        Footprint {
            domain_vector: 4 * GIB,
            scalar_vectors: [4 * GIB; 3],
            h_in_parts: 6 * GIB,
            bases: [(n - 1, 96), (n, 96), (n, 96), (n / 2, 96), (n / 2, 192)],
            chunks,
            matrices: 6399 << 20,
            matrix_stream: 256 << 20,
        }
    }

    /// Budgets as the H200 leaves them to the pool (less 1 GiB of upload staging and 194 MiB
    /// held before the first buffer): at 16 GiB the products and the H step in pairs beside
    /// the streamed matrices (f7cf9ba's G2 chunks of G1's points left room only for the H
    /// step in parts: 4.05 s a proof against 0.45 s in pairs), at 12 GiB large chunks (not
    /// 322,560-point ones with the widest windows, as f7cf9ba's quarter rule chose) and the
    /// products on the device.
    #[test]
    fn the_planned_2_27_shape_keeps_large_chunks_and_the_products_on_the_device() {
        let f = shape_2_27_planned();
        for (gib, pool_mib) in [
            (32, 31_549),
            (24, 23_357),
            (16, 15_165),
            (12, 11_325),
            (8, 7_229),
        ] {
            let plan = DevicePlan::new(&f, pool_mib << 20, 2).unwrap();
            let used = plan.kept_bytes
                + plan.resident_bytes
                + plan.matrices_bytes
                + plan.proof_bytes * plan.proofs_in_flight as u64;
            assert!(used <= plan.budget, "{gib} GiB: {plan:?}");
            let [g1, g2] = plan.chunk_points;
            assert!(
                g2 * 192 <= g1 * 96,
                "{gib} GiB: G2 chunks of G1's bytes: {plan:?}"
            );
            if gib >= 12 {
                assert!(g1 >= LARGE_CHUNK, "{gib} GiB: {}", plan.describe(&f));
            }
        }
        let plan = DevicePlan::new(&f, 23_357 << 20, 2).unwrap();
        assert_eq!(plan.proof, ProofBuffers::ProductsInPairs, "{plan:?}");
        assert!(!plan.matrices_streamed, "{plan:?}");
        assert!(plan.g2_beside_g1(), "{plan:?}");
        // The room of some of h's bases holds a second bucket array and stream buffers.
        assert!(plan.g1_together, "{}", plan.describe(&f));
        let plan = DevicePlan::new(&f, 15_165 << 20, 2).unwrap();
        assert_eq!(plan.proof, ProofBuffers::ProductsInPairs, "{plan:?}");
        assert!(plan.matrices_streamed, "{plan:?}");
        assert!(plan.g2_beside_g1(), "{plan:?}");
        // At 12 GiB the products beside the H step in parts (8 GiB at most with the aux
        // values off the device for its passes; 10 GiB with them, which left the products
        // to the CPU).
        let plan = DevicePlan::new(&f, 11_325 << 20, 2).unwrap();
        assert_eq!(plan.proof, ProofBuffers::ProductsInParts, "{plan:?}");
        assert!(plan.matrices_streamed, "{plan:?}");
        assert_eq!(plan.proof_bytes, 8 * GIB);
        assert!(
            !plan.g2_beside_g1(),
            "one query's scalars at a time: {plan:?}"
        );
    }

    #[test]
    fn a_large_budget_keeps_every_base_and_two_proofs() {
        let f = shape_2_27();
        let plan = DevicePlan::new(&f, 130 * GIB, 2).unwrap();
        assert!(plan.all_resident(&f));
        assert!(!plan.g2_beside_g1(), "G2's bases resident");
        assert!(!plan.g1_together, "nothing streams");
        assert_eq!(plan.proof, ProofBuffers::Resident);
        assert_eq!(plan.proofs_in_flight, 2);
        assert_eq!(plan.kept_bytes, f.chunks[0].kept, "the largest chunks");
        assert!(plan.room_with(plan.proofs_in_flight) < 130 * GIB);
    }

    #[test]
    fn smaller_budgets_stream_bases_and_scalars_and_never_exceed_the_budget() {
        let f = shape_2_27();
        for gib in [96, 64, 32, 24, 16, 12, 8] {
            let plan = DevicePlan::new(&f, gib * GIB, 2).unwrap();
            let used = plan.kept_bytes
                + plan.resident_bytes
                + plan.proof_bytes * plan.proofs_in_flight as u64;
            assert!(used <= plan.budget, "{gib} GiB: {plan:?}");
            // h is kept before the others.
            let h_share = plan.resident_points[0] as f64 / f.bases[0].0 as f64;
            for (set, &resident) in plan.resident_points.iter().enumerate().skip(1) {
                assert!(
                    resident == 0 || h_share == 1.0,
                    "{gib} GiB: set {set} before h"
                );
            }
            for points in plan.resident_points {
                assert_eq!(points as u64 % CHUNK_ALIGN, 0);
            }
        }
        let plan = DevicePlan::new(&f, 32 * GIB, 2).unwrap();
        assert_eq!(plan.proof, ProofBuffers::Resident);
        let plan = DevicePlan::new(&f, 16 * GIB, 2).unwrap();
        assert_eq!(
            (plan.proof, plan.proofs_in_flight),
            (ProofBuffers::ScalarsStreamed, 1)
        );
        assert_eq!(plan.streams, [true, true]);
        assert!(
            plan.chunk_points[0] < f.chunks[0].points[0],
            "smaller chunks"
        );
        let plan = DevicePlan::new(&f, 8 * GIB, 2).unwrap();
        assert_eq!(
            (plan.proof, plan.proofs_in_flight),
            (ProofBuffers::HInParts, 1)
        );
        // The widest windows' buckets (3.25 GiB kept) beside 5 GiB of H step do not fit 8 GiB:
        // capped buckets do, the widest cap at which a large chunk fits (2^20 points: 0.41 GiB
        // a chunk, 0.38 GiB of streams, 0.25 GiB of tables, three bucket arrays within 512
        // MiB; within 256 MiB with a fourth and a pair of streams more for G1's MSMs two at
        // a time), not the smallest chunk.
        assert!(f
            .chunks
            .iter()
            .all(|o| o.bucket_bytes < u64::MAX || o.kept + f.h_in_parts > 8 * GIB));
        assert_eq!(plan.chunk_points[0], LARGE_CHUNK, "{plan:?}");
        // With G1's MSMs two at a time (a bucket array and stream buffers more), within
        // 256 MiB.
        assert!(plan.g1_together, "{plan:?}");
        assert_eq!(plan.bucket_bytes, 1 << 28, "{plan:?}");
        assert!(plan.describe(&f).contains("buckets within 256 MiB"));
        let plan = DevicePlan::new(&f, 12 * GIB, 2).unwrap();
        assert_eq!(plan.bucket_bytes, u64::MAX, "12 GiB: the widest windows");
        // At 15 GiB a, b, c (12 GiB) leave no room for the widest windows' buckets: narrower
        // windows keep a, b, c on the device rather than the H step in parts (5 s a 2^27
        // proof on the H200).
        let plan = DevicePlan::new(&f, 15 * GIB, 2).unwrap();
        assert_eq!(plan.proof, ProofBuffers::ScalarsStreamed, "{plan:?}");
        assert!(plan.bucket_bytes < u64::MAX, "{plan:?}");
        assert!(plan.chunk_points[0] >= LARGE_CHUNK, "{plan:?}");
    }

    /// Known matrices (7 GiB, a 2^27 FilecoinLike's) take their room before the bases where
    /// they fit beside a proof with its scalars on the device (32 GiB), their stream buffers
    /// where only those fit (20, 16 and 12 GiB), and none where neither does (8 GiB); the
    /// plan stays within the budget either way.
    #[test]
    fn known_matrices_come_before_the_bases() {
        let mut f = shape_2_27();
        let without = DevicePlan::new(&f, 32 * GIB, 2).unwrap();
        f.matrices = 7 * GIB;
        f.matrix_stream = GIB / 4;
        let plan = DevicePlan::new(&f, 32 * GIB, 2).unwrap();
        assert_eq!(plan.proof, ProofBuffers::Resident);
        assert_eq!(plan.matrices_bytes, 7 * GIB);
        assert!(plan.room_with(plan.proofs_in_flight) >= 7 * GIB, "{plan:?}");
        assert!(plan.resident_bytes < without.resident_bytes, "{plan:?}");
        assert!(plan
            .describe(&f)
            .contains("room for the constraint matrices (7168 MiB)"));
        for gib in [130, 32, 28, 24, 20, 16, 12, 8] {
            let plan = DevicePlan::new(&f, gib * GIB, 2).unwrap();
            assert!(
                plan.matrices_bytes == 0 || plan.chunk_points[0] >= LARGE_CHUNK,
                "{gib} GiB: matrices beside small chunks: {plan:?}"
            );
            let used = plan.kept_bytes
                + plan.resident_bytes
                + plan.matrices_bytes
                + plan.proof_bytes * plan.proofs_in_flight as u64;
            assert!(used <= plan.budget, "{gib} GiB: {plan:?}");
            assert_eq!(
                plan.matrices_streamed,
                plan.matrices_bytes == f.matrix_stream,
                "{gib} GiB: {plan:?}"
            );
        }
        let plan = DevicePlan::new(&f, 20 * GIB, 2).unwrap();
        assert_eq!(plan.proof, ProofBuffers::Resident, "{plan:?}");
        assert!(plan.matrices_streamed, "{plan:?}");
        // At 16 GiB the L scalars and two vectors (12 GiB) with the stream buffers: the
        // products and the A, B gathers stay on the device.
        let plan = DevicePlan::new(&f, 16 * GIB, 2).unwrap();
        assert_eq!(plan.proof, ProofBuffers::ProductsInPairs, "{plan:?}");
        assert!(plan.matrices_streamed, "{plan:?}");
        assert!(plan.chunk_points[0] >= LARGE_CHUNK, "{plan:?}");
        assert!(plan
            .describe(&f)
            .contains("the constraint matrices (7168 MiB) streamed through 256 MiB"));
        // At 12 GiB the L scalars beside the H step in parts (9 GiB) with the stream buffers.
        let plan = DevicePlan::new(&f, 12 * GIB, 2).unwrap();
        assert_eq!(plan.proof, ProofBuffers::ProductsInParts, "{plan:?}");
        assert!(plan.matrices_streamed && plan.h_in_parts() && plan.products_with_h());
        assert!(plan.scalars_on_device());
        assert!(plan.describe(&f).contains("the H step in parts"));
        let plan = DevicePlan::new(&f, 8 * GIB, 2).unwrap();
        assert_eq!(plan.proof, ProofBuffers::HInParts, "{plan:?}");
        assert_eq!(plan.matrices_bytes, 0, "{plan:?}");
        assert!(plan
            .describe(&f)
            .contains("no room set aside for the constraint matrices (7168 MiB)"));
        // At 24 GiB the matrices do not fit beside three vectors and the L scalars (23 GiB):
        // two vectors at a time they do, beside large chunks.
        let plan = DevicePlan::new(&f, 24 * GIB, 2).unwrap();
        assert_eq!(plan.proof, ProofBuffers::ProductsInPairs, "{plan:?}");
        assert_eq!(plan.matrices_bytes, 7 * GIB);
        assert!(!plan.matrices_streamed);
        assert!(plan.scalars_on_device() && plan.products_with_h() && !plan.h_in_parts());
        // Unknown matrices never plan pairs, and the plan does not speak of them.
        f.matrices = 0;
        f.matrix_stream = 0;
        for gib in [32, 24, 20, 16] {
            let plan = DevicePlan::new(&f, gib * GIB, 2).unwrap();
            assert_ne!(plan.proof, ProofBuffers::ProductsInPairs, "{gib} GiB");
            assert!(!plan.describe(&f).contains("matrices"), "{gib} GiB");
        }
    }

    /// Window buckets the same at every chunk size and over a quarter of the budget: the
    /// largest chunks with room for one proof, not the smallest.
    #[test]
    fn fixed_workspace_bytes_over_a_quarter_keep_chunks_large() {
        let mut f = shape_2_27();
        for option in &mut f.chunks {
            option.kept += 4 * GIB;
        }
        let plan = DevicePlan::new(&f, 12 * GIB, 2).unwrap();
        assert_eq!(plan.proof, ProofBuffers::HInParts);
        let largest_fitting = f
            .chunks
            .iter()
            .find(|o| {
                let streams = 2 * 96 * o.points[0] as u64 + 2 * 192 * o.points[1] as u64;
                o.kept + streams + f.h_in_parts <= 12 * GIB
            })
            .unwrap();
        assert_eq!(plan.chunk_points, largest_fitting.points);
    }

    #[test]
    fn a_budget_below_one_proof_at_its_smallest_is_an_error() {
        let err = DevicePlan::new(&shape_2_27(), 5 * GIB, 2).unwrap_err();
        assert!(
            matches!(err, Error::VramBudget { needed, .. } if needed > 5 * GIB),
            "{err}"
        );
    }

    /// Where a proof holds a, b, c and its L scalars (the H100's default plan at 2^27, one
    /// proof in flight), the room b and c leave after its H step holds the next recorded
    /// proof's aux values: it stages ahead. A fully synthesized proof stages a, b, c too, and
    /// where the products run in pairs the A and B scalars take that room back: neither
    /// stages ahead.
    #[test]
    fn the_next_proof_stages_ahead_where_the_room_after_the_h_step_holds_its_staging() {
        let f = shape_2_27_planned();
        let plan = DevicePlan::new(&f, 74_887 << 20, 2).unwrap();
        assert_eq!(plan.proof, ProofBuffers::Resident, "{plan:?}");
        assert_eq!(plan.proofs_in_flight, 1, "{plan:?}");
        assert_eq!(plan.ahead_bytes, 4 * GIB);
        assert_eq!(plan.staged_bytes(&f, true), 4 * GIB);
        assert!(plan.stages_ahead(&f));
        let line = plan.describe(&f);
        assert!(
            line.contains("(0 MiB spare), the next staging ahead"),
            "{line}"
        );
        assert_eq!(plan.staged_bytes(&f, false), 16 * GIB);
        let pairs = DevicePlan::new(&f, 23_357 << 20, 2).unwrap();
        assert_eq!(pairs.proof, ProofBuffers::ProductsInPairs, "{pairs:?}");
        assert_eq!(pairs.ahead_bytes, 0);
        assert!(!pairs.stages_ahead(&f));
        assert!(!pairs.describe(&f).contains("ahead"));
    }

    /// The plan line says what nothing planned takes: the budget less the kept and resident
    /// bytes, the room set aside for the matrices and the proofs in flight.
    #[test]
    fn the_plan_line_names_the_spare_room() {
        let f = shape_2_27_planned();
        for (pool_mib, workers) in [(74_887, 2), (23_357, 1), (132_428, 2)] {
            let plan = DevicePlan::new(&f, pool_mib << 20, workers).unwrap();
            let used = plan.kept_bytes
                + plan.resident_bytes
                + plan.matrices_bytes
                + plan.proof_bytes * plan.proofs_in_flight as u64;
            let line = plan.describe(&f);
            let spare = format!("in flight ({} MiB spare)", (plan.budget - used) >> 20);
            assert!(line.contains(&spare), "{line} / {spare}");
        }
    }
}
