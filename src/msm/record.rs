//! One MSM as command buffers: per chunk of points the digit count and scan, the scatter and
//! the accumulation levels (adding into the buckets the earlier chunks left); then the bucket
//! reduction, whose window sums are read back.

use super::plan::MsmPlan;
use super::program::{MsmEntry, MsmParams, ScanEntry, ScanParams};
use super::timer::PassTimer;
use super::workspace::{scan_levels, Workspace};
use super::{MsmBases, MsmKernels, Scalars};
use crate::curve::GpuCurve;
use crate::error::Result;
use crate::gpu::UniformArray;

/// Where a chunk's bases are on the device.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ChunkBases {
    /// In resident buffer `buffer`, from point `at`.
    Resident { buffer: usize, at: usize },
    /// Uploaded into stream buffer `slot` (of two, alternating) just before the chunk.
    Streamed { slot: usize },
}

/// A run of points whose bases lie in one buffer: where, the first scalar, the points, and
/// which of the workspace's two scalar buffers holds its scalars (chunks alternate).
#[derive(Clone, Copy)]
struct Chunk {
    bases: ChunkBases,
    first: usize,
    len: usize,
    scalars: usize,
}

/// Cuts `len` scalars into chunks of at most `plan.chunk`: over the resident prefix of the
/// bases never straddling two of its buffers, past it at most `stream_points` each.
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
            scalars: chunks.len() % 2,
        });
        first += take;
    }
    chunks
}

/// Everything one MSM's passes bind, made once for all its chunks.
struct Recording<'a, C: GpuCurve> {
    kernels: &'a MsmKernels<C>,
    bases: &'a MsmBases<'a, C>,
    /// The two buffers streamed chunks' bases alternate between (none if nothing streams).
    stream: &'a [wgpu::Buffer],
    plan: &'a MsmPlan,
    ws: &'a Workspace,
    /// Per chunk one block per accumulation level, then the reduction's, then one per tree
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
    /// Records and submits every chunk, then the reduction; returns each window's sum.
    ///
    /// Each chunk's inputs (its scalars, and its bases where they stream) are copied into
    /// the workspace's buffers of its parity while the chunk before computes: queued after
    /// the chunk before last, which read those buffers, and before the previous chunk's
    /// passes. The previous chunk's last pass (`msm_clear_counts` over the next chunk's
    /// bindings) moves them to their kernels' use, so the next chunk's passes wait on no
    /// transfer and the copies queued before them can run beside them.
    pub(super) fn run(
        &self,
        bases: &MsmBases<'_, C>,
        stream: &[wgpu::Buffer],
        stream_points: usize,
        scalars: Scalars<'_>,
        plan: &MsmPlan,
        ws: &Workspace,
    ) -> Result<Vec<C::Projective>> {
        let gpu = &self.gpu;
        let chunks = chunks(bases, plan, stream_points, scalars.len());
        let recording = Recording::new(self, bases, stream, plan, ws, &chunks);
        let stage = |chunk: Chunk| -> Result<()> {
            scalars.stage(gpu, &ws.scalars[chunk.scalars], chunk.first, chunk.len)?;
            if let ChunkBases::Streamed { slot } = chunk.bases {
                let host = &bases.host[chunk.first..chunk.first + chunk.len];
                gpu.upload(&stream[slot], 0, C::affine_bytes(host))?;
            }
            Ok(())
        };
        stage(chunks[0])?;
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        encoder.clear_buffer(&ws.buckets, 0, None);
        recording.clear_counts(&mut encoder, chunks[0]);
        gpu.submit([encoder.finish()]);
        for (c, &chunk) in chunks.iter().enumerate() {
            let next = chunks.get(c + 1).copied();
            if let Some(next) = next {
                stage(next)?;
            }
            let mut encoder = gpu.device.create_command_encoder(&Default::default());
            recording.chunk(&mut encoder, c, chunk);
            if let Some(next) = next {
                recording.clear_counts(&mut encoder, next);
            }
            gpu.submit([encoder.finish()]);
        }
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        recording.reduction(&mut encoder, chunks[0]);
        let xyzz = C::XYZZ_BYTES as u64;
        for w in 0..plan.layout.windows as u64 {
            let from = plan.first_group(w as u32) as u64 * xyzz;
            encoder.copy_buffer_to_buffer(&ws.sums, from, &ws.readback, w * xyzz, xyzz);
        }
        recording.timer.resolve(&mut encoder);
        let submission = gpu.submit([encoder.finish()]);
        let bytes = gpu.read_mapped(&ws.readback, submission.clone())?;
        let sums = bytes.chunks(xyzz as usize).map(C::from_xyzz).collect();
        *self.profile.lock().unwrap_or_else(|e| e.into_inner()) =
            recording.timer.read(gpu, submission)?;
        Ok(sums)
    }
}

impl<'a, C: GpuCurve> Recording<'a, C> {
    fn new(
        kernels: &'a MsmKernels<C>,
        bases: &'a MsmBases<'a, C>,
        stream: &'a [wgpu::Buffer],
        plan: &'a MsmPlan,
        ws: &'a Workspace,
        chunks: &[Chunk],
    ) -> Self {
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
        let mut blocks: Vec<MsmParams> = chunks
            .iter()
            .enumerate()
            .flat_map(|(c, chunk)| {
                (0..levels).map(move |l| MsmParams {
                    segment: plan.level_segments[l],
                    ..params_of(chunk.len, l, c > 0)
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
        );
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
        Recording {
            kernels,
            bases,
            stream,
            plan,
            ws,
            params: UniformArray::new(gpu, &blocks),
            reduce_block,
            slots_block,
            strides,
            scan_lens,
            scan_params,
            scan_groups,
            timer: PassTimer::new(gpu, kernels.config.profile, 3 * chunks.len() + 2),
        }
    }

    fn grid(&self, entry: MsmEntry, threads: u64) -> (u32, u32) {
        self.kernels.gpu.grid(entry, threads)
    }

    /// The MSM's bind group over `chunk`'s bases. Accumulation levels ping-pong: parity 0
    /// reads list b and writes list a, parity 1 the reverse.
    fn bind(&self, chunk: Chunk, parity: usize) -> wgpu::BindGroup {
        let ws = self.ws;
        let (inp, out) = (1 - parity, parity);
        let (buffer, at) = match chunk.bases {
            ChunkBases::Resident { buffer, at } => (self.bases.resident_buffer(buffer), at),
            ChunkBases::Streamed { slot } => (&self.stream[slot], 0),
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
                ws.scalars[chunk.scalars].as_entire_binding(),
                bases,
                ws.counts.as_entire_binding(),
                ws.cursor.as_entire_binding(),
                ws.sorted.as_entire_binding(),
                ws.keys[inp].as_entire_binding(),
                ws.points[inp].as_entire_binding(),
                ws.keys[out].as_entire_binding(),
                ws.points[out].as_entire_binding(),
                ws.buckets.as_entire_binding(),
                ws.lengths.as_entire_binding(),
                ws.sums.as_entire_binding(),
                ws.digit_windows.as_entire_binding(),
            ],
        )
    }

    /// Chunk `c`: count and scan the digits, scatter, accumulate level by level (chunks after
    /// the first add into the buckets: `MsmParams::fold`).
    fn chunk(&self, encoder: &mut wgpu::CommandEncoder, c: usize, chunk: Chunk) {
        let (plan, msm) = (self.plan, &self.kernels.msm);
        let levels = plan.level_bounds.len();
        let groups = [0, 1].map(|parity| self.bind(chunk, parity));
        let chunk_params = self.params.offset(c * levels);
        let point_grid = self.grid(MsmEntry::Count, chunk.len as u64);

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
        {
            let mut pass = encoder.begin_compute_pass(&self.timer.pass("accumulate"));
            for (level, &bound) in plan.level_bounds.iter().enumerate() {
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
                    &[self.params.offset(c * levels + level)],
                );
                pass.dispatch_workgroups(x, y, 1);
            }
        }
    }

    /// Zeroes the counts for `chunk`, over its bindings: the pass that moves its scalars
    /// and bases from their copies to the kernels' use.
    fn clear_counts(&self, encoder: &mut wgpu::CommandEncoder, chunk: Chunk) {
        let group = self.bind(chunk, 0);
        let mut pass = encoder.begin_compute_pass(&Default::default());
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
    /// groups (the sums land at each window's first group).
    fn reduction(&self, encoder: &mut wgpu::CommandEncoder, first_chunk: Chunk) {
        let (plan, msm) = (self.plan, &self.kernels.msm);
        let group = self.bind(first_chunk, 0);
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
