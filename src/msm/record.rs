//! MSMs as command buffers: per chunk of points the digit count and scan, the scatter and
//! the accumulation levels (adding into the buckets the earlier chunks left); then the bucket
//! reduction, whose window sums are read back. Several MSMs run together chunk by chunk in
//! turn ([`MsmKernels::msm_together`]), sharing the workspace's per-chunk buffers, each with
//! its own buckets; MSMs over the same bases share each streamed chunk's upload.

use super::plan::MsmPlan;
use super::program::{MsmEntry, MsmParams, ScanEntry, ScanParams};
use super::timer::PassTimer;
use super::workspace::{scan_levels, Workspace};
use super::{MsmBases, MsmJob, MsmKernels};
use crate::curve::GpuCurve;
use crate::error::Result;
use crate::gpu::UniformArray;

/// Where a chunk's bases are on the device.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ChunkBases {
    /// In resident buffer `buffer`, from point `at`.
    Resident { buffer: usize, at: usize },
    /// Uploaded into stream buffer `slot` of its bases' two (alternating) just before the
    /// chunk's first step.
    Streamed { slot: usize },
}

/// A run of points whose bases lie in one buffer: where, the first scalar, the points.
#[derive(Clone, Copy)]
struct Chunk {
    bases: ChunkBases,
    first: usize,
    len: usize,
}

/// Cuts `len` scalars into chunks of at most `plan.chunk`: over the resident prefix of the
/// bases never straddling two of its buffers, past it at most `stream_points` each. A
/// shorter `len` over the same bases gives a prefix of the same chunks (the last one cut).
fn chunks<C: GpuCurve>(
    bases: &MsmBases<'_, C>,
    plan: &MsmPlan,
    stream_points: usize,
    len: usize,
) -> Vec<Chunk> {
    let mut chunks = Vec::new();
    let mut first = 0usize;
    let mut streamed = 0usize;
    let resident_len = bases.resident_len();
    while first < len {
        let (chunk_bases, take) = match bases.resident {
            Some(resident) if first < resident_len => {
                let buffer = first / resident.per_buffer;
                let at = first % resident.per_buffer;
                let room = (resident.buffers[buffer].1 - at).min(resident_len - first);
                (ChunkBases::Resident { buffer, at }, plan.chunk.min(room))
            }
            _ => {
                streamed += 1;
                (
                    ChunkBases::Streamed { slot: streamed % 2 },
                    plan.chunk.min(stream_points.max(1)),
                )
            }
        };
        let take = take.min(len - first);
        chunks.push(Chunk {
            bases: chunk_bases,
            first,
            len: take,
        });
        first += take;
    }
    chunks
}

/// The jobs' bases, one entry per distinct set (jobs over equal bases share one): the
/// streamed chunks' two buffers, and how many points each holds.
pub(super) struct BasesStreams {
    /// Per job, its entry in `buffers`.
    pub of_job: Vec<usize>,
    /// Per distinct set of bases, its two stream buffers (none if nothing of it streams).
    pub buffers: Vec<Vec<wgpu::Buffer>>,
    /// Points of a streamed chunk at most: what each stream buffer holds.
    pub points: usize,
}

/// One job's chunk as the GPU runs it: which job, which of its chunks, and which of the
/// workspace's two scalar buffers holds its scalars (steps alternate).
#[derive(Clone, Copy)]
struct Step {
    job: usize,
    /// Which of the job's chunks: its chunks after the first add into its buckets.
    index: usize,
    chunk: Chunk,
    scalars: usize,
    /// Points of bases this step uploads: the first step over a streamed chunk uploads the
    /// longest of the chunks its bases' jobs take there; the others, none.
    uploads: usize,
}

/// Round by round, each job's chunk of that round: one chunk of bases is uploaded once and
/// used by every job over it before the next round's.
fn steps(job_chunks: &[Vec<Chunk>], bases_of_job: &[usize]) -> Vec<Step> {
    let rounds = job_chunks.iter().map(Vec::len).max().unwrap_or(0);
    let mut steps = Vec::new();
    for index in 0..rounds {
        let mut uploaded = Vec::new();
        for (job, chunks) in job_chunks.iter().enumerate() {
            let Some(&chunk) = chunks.get(index) else {
                continue;
            };
            let set = bases_of_job[job];
            let first_over_them = !uploaded.contains(&set);
            let uploads = match chunk.bases {
                ChunkBases::Streamed { .. } if first_over_them => (0..job_chunks.len())
                    .filter(|&other| bases_of_job[other] == set)
                    .filter_map(|other| job_chunks[other].get(index))
                    .map(|c| c.len)
                    .max()
                    .unwrap_or(chunk.len),
                _ => 0,
            };
            uploaded.push(set);
            steps.push(Step {
                job,
                index,
                chunk,
                scalars: steps.len() % 2,
                uploads,
            });
        }
    }
    steps
}

/// Everything the jobs' passes bind, made once for all their steps.
struct Recording<'a, C: GpuCurve> {
    kernels: &'a MsmKernels<C>,
    jobs: &'a [MsmJob<'a, C>],
    streams: &'a BasesStreams,
    /// Per job, its bucket array.
    buckets: Vec<&'a wgpu::Buffer>,
    plan: &'a MsmPlan,
    ws: &'a Workspace,
    /// Per step one block per accumulation level, then the reduction's, then one per tree
    /// stride, then the count slots' (msm_clear_counts, msm_start_cursors).
    params: UniformArray,
    reduce_block: usize,
    slots_block: usize,
    strides: Vec<u32>,
    scan_lens: Vec<u64>,
    scan_params: UniformArray,
    scan_groups: Vec<wgpu::BindGroup>,
    timer: PassTimer,
}

impl<C: GpuCurve> MsmKernels<C> {
    /// Records and submits every step, then each job's reduction; returns each job's window
    /// sums. `buckets` holds a bucket array for each job after the first (which takes the
    /// workspace's).
    ///
    /// Each step's inputs (its scalars, and its bases where they stream) are copied into the
    /// buffers of its parity while the step before computes: queued after the step before
    /// last, which read those buffers (streamed bases: after the round before last, which
    /// read them), and before the previous step's passes. The previous step's last pass
    /// (`msm_clear_counts` over the next step's bindings) moves them to their kernels' use,
    /// so the next step's passes wait on no transfer and the copies queued before them can
    /// run beside them.
    pub(super) fn run(
        &self,
        jobs: &[MsmJob<'_, C>],
        streams: &BasesStreams,
        buckets: &[wgpu::Buffer],
        plan: &MsmPlan,
        ws: &Workspace,
    ) -> Result<Vec<Vec<C::Projective>>> {
        let gpu = &self.gpu;
        let job_chunks: Vec<Vec<Chunk>> = jobs
            .iter()
            .map(|job| chunks(&job.bases, plan, streams.points, job.scalars.len()))
            .collect();
        let steps = steps(&job_chunks, &streams.of_job);
        let buckets: Vec<&wgpu::Buffer> = std::iter::once(&ws.buckets).chain(buckets).collect();
        let recording = Recording::new(self, jobs, streams, buckets, plan, ws, &steps)?;
        let stage = |step: Step| -> Result<()> {
            let (job, chunk) = (&jobs[step.job], step.chunk);
            job.scalars
                .stage(gpu, &ws.scalars[step.scalars], chunk.first, chunk.len)?;
            if let (ChunkBases::Streamed { slot }, 1..) = (chunk.bases, step.uploads) {
                let host = &job.bases.host[chunk.first..chunk.first + step.uploads];
                let stream = &streams.buffers[streams.of_job[step.job]][slot];
                gpu.upload(stream, 0, C::affine_bytes(host))?;
            }
            Ok(())
        };
        stage(steps[0])?;
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        for job_buckets in &recording.buckets {
            encoder.clear_buffer(job_buckets, 0, None);
        }
        recording.clear_counts(&mut encoder, steps[0]);
        gpu.submit([encoder.finish()]);
        for (s, &step) in steps.iter().enumerate() {
            let next = steps.get(s + 1).copied();
            if let Some(next) = next {
                stage(next)?;
            }
            let mut encoder = gpu.device.create_command_encoder(&Default::default());
            recording.step(&mut encoder, s, step);
            if let Some(next) = next {
                recording.clear_counts(&mut encoder, next);
            }
            gpu.submit([encoder.finish()]);
        }
        let xyzz = C::XYZZ_BYTES as u64;
        let windows = plan.layout.windows as u64;
        let readback = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("msm window sums"),
            size: jobs.len() as u64 * windows * xyzz,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        for job in 0..jobs.len() {
            let first = *steps
                .iter()
                .find(|step| step.job == job)
                .expect("every job has a step");
            recording.reduction(&mut encoder, first);
            for w in 0..windows {
                let from = plan.first_group(w as u32) as u64 * xyzz;
                let to = (job as u64 * windows + w) * xyzz;
                encoder.copy_buffer_to_buffer(&ws.sums, from, &readback, to, xyzz);
            }
        }
        recording.timer.resolve(&mut encoder);
        let submission = gpu.submit([encoder.finish()]);
        let bytes = gpu.read_mapped(&readback, submission.clone())?;
        let sums = bytes
            .chunks(windows as usize * xyzz as usize)
            .map(|job| job.chunks(xyzz as usize).map(C::from_xyzz).collect())
            .collect();
        *self.profile.lock().unwrap_or_else(|e| e.into_inner()) =
            recording.timer.read(gpu, submission)?;
        Ok(sums)
    }
}

impl<'a, C: GpuCurve> Recording<'a, C> {
    fn new(
        kernels: &'a MsmKernels<C>,
        jobs: &'a [MsmJob<'a, C>],
        streams: &'a BasesStreams,
        buckets: Vec<&'a wgpu::Buffer>,
        plan: &'a MsmPlan,
        ws: &'a Workspace,
        steps: &[Step],
    ) -> Result<Self> {
        let gpu = &kernels.gpu;
        let levels = plan.level_bounds.len();
        let params_of = |count: usize, level: usize, fold: bool| MsmParams {
            count: count as u32,
            window_bits: plan.layout.bits,
            windows: plan.layout.windows,
            wide_windows: plan.layout.wide,
            segment: plan.segment,
            level: level as u32,
            groups: plan.groups,
            fold: fold as u32,
        };
        let mut blocks: Vec<MsmParams> = steps
            .iter()
            .flat_map(|step| {
                (0..levels).map(move |l| MsmParams {
                    segment: plan.level_segments[l],
                    ..params_of(step.chunk.len, l, step.index > 0)
                })
            })
            .collect();
        let reduce_block = blocks.len();
        blocks.push(params_of(0, 0, false));
        let strides = plan.tree_strides();
        blocks.extend(strides.iter().map(|&s| params_of(0, s as usize, false)));
        let slots_block = blocks.len();
        blocks.push(params_of(plan.count_slots() as usize, 0, false));

        let scan_lens = scan_levels(plan.count_slots());
        let scan_params = UniformArray::new(
            gpu,
            &scan_lens
                .iter()
                .map(|&len| ScanParams {
                    len: len as u32,
                    _pad: [0; 3],
                })
                .collect::<Vec<_>>(),
        )?;
        let scan_groups = (0..scan_lens.len())
            .map(|level| {
                let data = if level == 0 {
                    &ws.counts
                } else {
                    &ws.scan_sums[level - 1]
                };
                gpu.bind_group(
                    &kernels.scan,
                    &[
                        scan_params.binding(std::mem::size_of::<ScanParams>()),
                        data.as_entire_binding(),
                        ws.scan_sums[level].as_entire_binding(),
                    ],
                )
            })
            .collect();
        Ok(Recording {
            kernels,
            jobs,
            streams,
            buckets,
            plan,
            ws,
            params: UniformArray::new(gpu, &blocks)?,
            reduce_block,
            slots_block,
            strides,
            scan_lens,
            scan_params,
            scan_groups,
            timer: PassTimer::new(
                gpu,
                kernels.config.profile,
                (3 + plan.level_bounds.len()) * steps.len() + 2 * jobs.len(),
            ),
        })
    }

    fn grid(&self, entry: MsmEntry, threads: u64) -> (u32, u32) {
        self.kernels.gpu.grid(entry, threads)
    }

    /// The MSM's bind group over `step`'s scalars, bases and job's buckets. Accumulation
    /// levels ping-pong: parity 0 reads list b and writes list a, parity 1 the reverse.
    fn bind(&self, step: Step, parity: usize) -> wgpu::BindGroup {
        let ws = self.ws;
        let (inp, out) = (1 - parity, parity);
        let chunk = step.chunk;
        let (buffer, at) = match chunk.bases {
            ChunkBases::Resident { buffer, at } => {
                (self.jobs[step.job].bases.resident_buffer(buffer), at)
            }
            ChunkBases::Streamed { slot } => (
                &self.streams.buffers[self.streams.of_job[step.job]][slot],
                0,
            ),
        };
        let bases = wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer,
            offset: (at * C::AFFINE_BYTES) as u64,
            size: wgpu::BufferSize::new((chunk.len.max(1) * C::AFFINE_BYTES) as u64),
        });
        self.kernels.gpu.bind_group(
            &self.kernels.msm,
            &[
                self.params.binding(std::mem::size_of::<MsmParams>()),
                ws.scalars[step.scalars].as_entire_binding(),
                bases,
                ws.counts.as_entire_binding(),
                ws.cursor.as_entire_binding(),
                ws.sorted.as_entire_binding(),
                ws.keys[inp].as_entire_binding(),
                ws.points[inp].as_entire_binding(),
                ws.keys[out].as_entire_binding(),
                ws.points[out].as_entire_binding(),
                self.buckets[step.job].as_entire_binding(),
                ws.lengths.as_entire_binding(),
                ws.sums.as_entire_binding(),
                ws.digit_windows.as_entire_binding(),
            ],
        )
    }

    /// Step `s`: count and scan the digits of its chunk, scatter, accumulate level by level
    /// (a job's chunks after its first add into its buckets: `MsmParams::fold`).
    fn step(&self, encoder: &mut wgpu::CommandEncoder, s: usize, step: Step) {
        let (plan, msm) = (self.plan, &self.kernels.msm);
        let levels = plan.level_bounds.len();
        let groups = [0, 1].map(|parity| self.bind(step, parity));
        let chunk_params = self.params.offset(s * levels);
        let point_grid = self.grid(MsmEntry::Count, step.chunk.len as u64);

        {
            let mut pass = encoder.begin_compute_pass(&self.timer.pass("count + scan"));
            pass.set_pipeline(msm.pipeline(MsmEntry::Count));
            pass.set_bind_group(0, &groups[0], &[chunk_params]);
            pass.dispatch_workgroups(point_grid.0, point_grid.1, 1);
            self.scan(&mut pass);
            pass.set_pipeline(msm.pipeline(MsmEntry::StartCursors));
            pass.set_bind_group(0, &groups[0], &[self.params.offset(self.slots_block)]);
            let (x, y) = self.grid(MsmEntry::StartCursors, plan.count_slots());
            pass.dispatch_workgroups(x, y, 1);
        }
        {
            let mut pass = encoder.begin_compute_pass(&self.timer.pass("scatter"));
            pass.set_pipeline(msm.pipeline(MsmEntry::Scatter));
            pass.set_bind_group(0, &groups[0], &[chunk_params]);
            pass.dispatch_workgroups(point_grid.0, point_grid.1, plan.layout.windows);
        }
        // A pass per level, so that a profile shows what each level costs.
        for (level, &bound) in plan.level_bounds.iter().enumerate() {
            let timed_as = || format!("accumulate level {level}");
            let mut pass =
                encoder.begin_compute_pass(&self.timer.pass_timed_as("accumulate", timed_as));
            let entry = if level == 0 {
                MsmEntry::AccumulateBases
            } else {
                MsmEntry::AccumulatePartials
            };
            pass.set_pipeline(msm.pipeline(entry));
            let (x, y) = self.grid(entry, bound.div_ceil(plan.level_segments[level] as u64));
            pass.set_bind_group(
                0,
                &groups[level % 2],
                &[self.params.offset(s * levels + level)],
            );
            pass.dispatch_workgroups(x, y, 1);
        }
    }

    /// Zeroes the counts for `step`, over its bindings: the pass that moves its scalars
    /// and bases from their copies to the kernels' use.
    fn clear_counts(&self, encoder: &mut wgpu::CommandEncoder, step: Step) {
        let group = self.bind(step, 0);
        let mut pass = encoder.begin_compute_pass(&self.timer.pass("clear counts"));
        pass.set_pipeline(self.kernels.msm.pipeline(MsmEntry::ClearCounts));
        pass.set_bind_group(0, &group, &[self.params.offset(self.slots_block)]);
        let (x, y) = self.grid(MsmEntry::ClearCounts, self.plan.count_slots());
        pass.dispatch_workgroups(x, y, 1);
    }

    /// Exclusive scan of the counts in place, level by level (see scan.wgsl).
    fn scan(&self, pass: &mut wgpu::ComputePass<'_>) {
        let scan = &self.kernels.scan;
        pass.set_pipeline(scan.pipeline(ScanEntry::Blocks));
        for (level, &len) in self.scan_lens.iter().enumerate() {
            let (x, y) = self.kernels.gpu.grid(ScanEntry::Blocks, len);
            pass.set_bind_group(
                0,
                &self.scan_groups[level],
                &[self.scan_params.offset(level)],
            );
            pass.dispatch_workgroups(x, y, 1);
        }
        pass.set_pipeline(scan.pipeline(ScanEntry::AddOffsets));
        for (level, &len) in self.scan_lens.iter().enumerate().rev().skip(1) {
            let (x, y) = self.kernels.gpu.grid(ScanEntry::AddOffsets, len);
            pass.set_bind_group(
                0,
                &self.scan_groups[level],
                &[self.scan_params.offset(level)],
            );
            pass.dispatch_workgroups(x, y, 1);
        }
    }

    /// Per window, sum_b b · bucket[b] in groups of buckets, then a pairwise tree over the
    /// groups (the sums land at each window's first group), over the buckets of the job of
    /// `step`.
    fn reduction(&self, encoder: &mut wgpu::CommandEncoder, step: Step) {
        let (plan, msm) = (self.plan, &self.kernels.msm);
        let group = self.bind(step, 0);
        {
            let mut pass = encoder.begin_compute_pass(&self.timer.pass("reduce buckets"));
            pass.set_bind_group(0, &group, &[self.params.offset(self.reduce_block)]);
            pass.set_pipeline(msm.pipeline(MsmEntry::ReduceGroups));
            let (x, y) = self.grid(MsmEntry::ReduceGroups, plan.total_groups() as u64);
            pass.dispatch_workgroups(x, y, 1);
        }
        let mut pass = encoder.begin_compute_pass(&self.timer.pass("sum groups"));
        pass.set_pipeline(msm.pipeline(MsmEntry::SumPairs));
        for (k, &stride) in self.strides.iter().enumerate() {
            let pairs = (plan.window_groups(0) as u64).div_ceil(2 * stride as u64);
            let (x, y) = self.grid(MsmEntry::SumPairs, plan.layout.windows as u64 * pairs);
            pass.set_bind_group(0, &group, &[self.params.offset(self.reduce_block + 1 + k)]);
            pass.dispatch_workgroups(x, y, 1);
        }
    }
}
