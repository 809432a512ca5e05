//! Multi-scalar multiplication Σ scalar_i · base_i on G1 and G2.
//!
//! The GPU path is Pippenger with signed digits computed on the GPU, a counting sort of
//! (window, bucket) keys done in parallel, bucket accumulation over equal-sized segments of
//! the sorted list (so skewed scalars cannot pile onto one thread), and a parallel bucket
//! reduction: `shaders/msm.wgsl`, declared in [`program`], recorded by `record.rs` into
//! workspaces (`workspace.rs`) sized by a [`plan`]. Bases are uploaded once
//! ([`ResidentBases`]) and serve any number of MSMs; scalars come from the host or from a
//! device vector ([`Scalars`]). Vectors over the binding limit run in chunks that share one
//! bucket array. [`msm_cpu`] is the blstrs reference behind the same seam.

pub mod plan;
pub mod program;
mod record;
mod timer;
mod workspace;

pub use plan::{MsmConfig, MsmPlan, PointCosts, WindowLayout, CHUNK_ALIGN};
pub use workspace::{kept_bytes, WORKSPACES_KEPT};

use crate::curve::GpuCurve;
use crate::error::{Error, Result};
use crate::field::GpuField;
use crate::gpu::pool::BufferPool;
use crate::gpu::{Compiled, DeviceVector, GpuContext, Program, WideMul};
use blstrs::Scalar;
use group::Group;
use program::{MsmProgram, ScanProgram};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use workspace::Workspaces;

/// The CPU reference: blstrs' multi-exponentiation over the first `scalars.len()` bases.
pub fn msm_cpu<C: GpuCurve>(bases: &[C::Affine], scalars: &[Scalar]) -> Result<C::Projective> {
    check_lengths(bases.len(), scalars.len())?;
    if scalars.is_empty() {
        return Ok(C::Projective::identity());
    }
    Ok(C::multi_exp_cpu(&bases[..scalars.len()], scalars))
}

fn check_lengths(bases: usize, scalars: usize) -> Result<()> {
    if scalars > bases {
        return Err(Error::InvalidInput(format!(
            "{scalars} scalars but only {bases} bases"
        )));
    }
    Ok(())
}

/// Where an MSM's scalars are: in host memory, or on the device (an NTT's output, so the H
/// polynomial goes from its transform to its MSM without a round trip).
#[derive(Clone, Copy)]
pub enum Scalars<'a> {
    Host(&'a [Scalar]),
    /// The first `len` elements of a device vector.
    Device(&'a DeviceVector<Scalar>, usize),
}

impl Scalars<'_> {
    pub fn len(&self) -> usize {
        match self {
            Scalars::Host(scalars) => scalars.len(),
            Scalars::Device(vector, len) => (*len).min(vector.len()),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Puts scalars `first..first + len` at the start of `target`, submitted: an upload for
    /// host scalars, copies for device ones.
    fn stage(
        &self,
        gpu: &GpuContext,
        target: &wgpu::Buffer,
        first: usize,
        len: usize,
    ) -> Result<()> {
        const BYTES: u64 = std::mem::size_of::<Scalar>() as u64;
        match *self {
            Scalars::Host(scalars) => {
                gpu.upload(target, 0, Scalar::as_bytes(&scalars[first..first + len]))
            }
            Scalars::Device(vector, _) => {
                let mut encoder = gpu.device.create_command_encoder(&Default::default());
                let (parts, part_len) = (vector.parts(), vector.layout().part_len());
                let mut at = first;
                while at < first + len {
                    let (part, within) = (at / part_len, at % part_len);
                    let take = (part_len - within).min(first + len - at);
                    encoder.copy_buffer_to_buffer(
                        &parts[part],
                        within as u64 * BYTES,
                        target,
                        (at - first) as u64 * BYTES,
                        take as u64 * BYTES,
                    );
                    at += take;
                }
                gpu.submit([encoder.finish()]);
                // msm_from waits for the read-back after these copies: the vector is free to
                // drop (and its parts to be reused) once it returns.
                Ok(())
            }
        }
    }
}

/// Bases living on the device: one or more buffers, each within the binding limit.
pub struct ResidentBases<C: GpuCurve> {
    /// (buffer, points in it); every buffer but the last holds `per_buffer` points.
    buffers: Vec<(wgpu::Buffer, usize)>,
    per_buffer: usize,
    len: usize,
    _curve: PhantomData<C>,
}

impl<C: GpuCurve> ResidentBases<C> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Caps on one MSM's workspace below what the device allows: points per chunk, and bytes of
/// the bucket array (narrower windows: more additions a point, less memory). A VRAM plan
/// sets them; [`MsmLimits::NONE`] leaves the MSM its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsmLimits {
    pub chunk_points: usize,
    pub bucket_bytes: u64,
}

impl MsmLimits {
    pub const NONE: MsmLimits = MsmLimits {
        chunk_points: usize::MAX,
        bucket_bytes: u64::MAX,
    };

    /// Chunks of at most `points`, buckets uncapped.
    pub fn chunks_of(points: usize) -> Self {
        MsmLimits {
            chunk_points: points,
            ..Self::NONE
        }
    }
}

/// An MSM's bases when they do not all fit the device: the first ones resident (any number,
/// none included), the rest read from host memory and streamed to the device chunk by
/// chunk ([`MsmKernels::msm_streaming`]).
pub struct MsmBases<'a, C: GpuCurve> {
    /// A prefix of `host` on the device.
    pub resident: Option<&'a ResidentBases<C>>,
    /// Every base, resident ones included.
    pub host: &'a [C::Affine],
}

impl<'a, C: GpuCurve> MsmBases<'a, C> {
    /// Whether `other` is these bases: the same host slice and the same resident prefix.
    fn same_as(&self, other: &MsmBases<'_, C>) -> bool {
        std::ptr::eq(self.host, other.host)
            && match (self.resident, other.resident) {
                (Some(a), Some(b)) => std::ptr::eq(a, b),
                (a, b) => a.is_none() && b.is_none(),
            }
    }

    fn resident_len(&self) -> usize {
        self.resident.map_or(0, ResidentBases::len)
    }

    fn resident_buffer(&self, buffer: usize) -> &'a wgpu::Buffer {
        let resident = self.resident.expect("a resident chunk has resident bases");
        &resident.buffers[buffer].0
    }
}

/// One MSM of several run together ([`MsmKernels::msm_together`]).
pub struct MsmJob<'a, C: GpuCurve> {
    pub bases: MsmBases<'a, C>,
    pub scalars: Scalars<'a>,
}

// By hand: a derive would ask `C: Copy` of the curve marker.
impl<C: GpuCurve> Clone for MsmBases<'_, C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C: GpuCurve> Copy for MsmBases<'_, C> {}

impl<C: GpuCurve> Clone for MsmJob<'_, C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C: GpuCurve> Copy for MsmJob<'_, C> {}

/// The MSM kernels of one curve on one device, with the workspaces of recent plans kept for
/// the next calls.
pub struct MsmKernels<C: GpuCurve> {
    gpu: GpuContext,
    msm: Arc<Compiled<MsmProgram<C>>>,
    scan: Arc<Compiled<ScanProgram>>,
    config: MsmConfig,
    workspaces: Mutex<Workspaces>,
    /// Workspaces count against this pool's VRAM budget, when there is one.
    pool: Option<BufferPool>,
    profile: Mutex<Vec<(String, f64)>>,
}

impl<C: GpuCurve> MsmKernels<C> {
    /// Compiles the MSM kernels of curve `C` for one wide-multiply path.
    pub fn new(gpu: &GpuContext, wide_mul: WideMul, config: MsmConfig) -> Result<Self> {
        let needed = MsmProgram::<C>::BINDINGS.len() as u32;
        if gpu.limits.max_storage_buffers_per_shader_stage < needed - 1 {
            return Err(Error::Device(format!(
                "{} allows {} storage buffers per shader stage; the MSM needs {}",
                gpu.describe(),
                gpu.limits.max_storage_buffers_per_shader_stage,
                needed - 1
            )));
        }
        Ok(MsmKernels {
            gpu: gpu.clone(),
            msm: Arc::new(gpu.compile(wide_mul)?),
            scan: Arc::new(gpu.compile(WideMul::Portable)?),
            config,
            workspaces: Mutex::default(),
            pool: None,
            profile: Mutex::new(Vec::new()),
        })
    }

    /// Counts the workspaces against `pool`'s VRAM budget.
    pub fn with_pool(mut self, pool: BufferPool) -> Self {
        self.pool = Some(pool);
        self
    }

    /// The same compiled kernels under another configuration (no recompilation).
    pub fn with_config(&self, config: MsmConfig) -> Self {
        MsmKernels {
            gpu: self.gpu.clone(),
            msm: self.msm.clone(),
            scan: self.scan.clone(),
            config,
            workspaces: Mutex::default(),
            pool: self.pool.clone(),
            profile: Mutex::new(Vec::new()),
        }
    }

    /// Frees the workspaces kept for the next MSMs.
    pub fn release_workspaces(&self) {
        self.workspaces
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// GPU time of each pass of the last MSM, in milliseconds, when `MsmConfig::profile` is
    /// set and the device has timestamp queries; empty otherwise.
    pub fn last_profile(&self) -> Vec<(String, f64)> {
        self.profile
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn wide_mul(&self) -> WideMul {
        self.msm.wide_mul
    }

    /// Driver compile time of the MSM and scan programs.
    pub fn compile_time(&self) -> std::time::Duration {
        self.msm.compile_time + self.scan.compile_time
    }

    fn binding_limit(&self) -> u64 {
        let device = self
            .gpu
            .limits
            .max_storage_buffer_binding_size
            .min(self.gpu.limits.max_buffer_size);
        self.config
            .max_binding_bytes
            .map_or(device, |cap| cap.min(device))
    }

    /// The sizes of the curve's points and the loop trips of one addition on this path,
    /// under this adapter's loop cap (`GpuContext::loop_cap`).
    pub fn point_costs(&self) -> PointCosts {
        PointCosts::new(
            C::AFFINE_BYTES as u64,
            C::XYZZ_BYTES as u64,
            C::Base::mul_loop_trips(self.wide_mul()),
        )
        .with_loop_cap(self.gpu.loop_cap())
        .with_bucket_cost(C::BUCKET_COST)
    }

    /// The plan an MSM of `n` points would follow.
    pub fn plan(&self, n: usize) -> Result<MsmPlan> {
        self.plan_within(n, MsmLimits::NONE)
    }

    /// [`plan`](Self::plan) within `limits` (a smaller workspace).
    pub fn plan_within(&self, n: usize, limits: MsmLimits) -> Result<MsmPlan> {
        let mut config = self.config.clone();
        let MsmLimits {
            chunk_points,
            bucket_bytes,
        } = limits;
        config.max_chunk_points = Some(
            config
                .max_chunk_points
                .map_or(chunk_points, |cap| cap.min(chunk_points)),
        );
        config.max_bucket_bytes = Some(
            config
                .max_bucket_bytes
                .map_or(bucket_bytes, |cap| cap.min(bucket_bytes)),
        );
        config.segment = Some(config.segment.unwrap_or(C::SEGMENT));
        if config.reduction_threads.is_none() && self.gpu.info.device_type == wgpu::DeviceType::Cpu
        {
            config.reduction_threads = Some(1024);
        }
        MsmPlan::new(n, self.point_costs(), self.binding_limit(), &config)
    }

    /// Device bytes of the workspace an MSM of `n` points allocates (and keeps: see
    /// [`WORKSPACES_KEPT`]).
    pub fn workspace_bytes(&self, n: usize) -> Result<u64> {
        self.workspace_bytes_within(n, MsmLimits::NONE)
    }

    /// [`workspace_bytes`](Self::workspace_bytes) within `limits`.
    pub fn workspace_bytes_within(&self, n: usize, limits: MsmLimits) -> Result<u64> {
        Ok(self
            .plan_within(n.max(1), limits)?
            .workspace_bytes(C::XYZZ_BYTES as u64))
    }

    /// Uploads `bases` once; they stay on the device for any number of MSMs.
    pub fn upload_bases(&self, bases: &[C::Affine]) -> Result<ResidentBases<C>> {
        let limit = self.binding_limit();
        let fit = limit / C::AFFINE_BYTES as u64;
        if fit < plan::CHUNK_ALIGN && (bases.len() as u64) > fit {
            return Err(Error::TooLarge {
                what: "a buffer of 256 bases",
                needed: plan::CHUNK_ALIGN * C::AFFINE_BYTES as u64,
                limit,
            });
        }
        let per_buffer = if bases.len() as u64 <= fit {
            bases.len().max(1)
        } else {
            (fit - fit % plan::CHUNK_ALIGN) as usize
        };
        let bytes = std::mem::size_of_val(bases) as u64;
        let buffers = self.gpu.allocating("the MSM bases", bytes, || {
            bases
                .chunks(per_buffer)
                .map(|part| {
                    let buffer = self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
                        label: Some("msm bases"),
                        size: std::mem::size_of_val(part) as u64,
                        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                        mapped_at_creation: false,
                    });
                    (buffer, part.len())
                })
                .collect::<Vec<_>>()
        })?;
        for ((buffer, _), part) in buffers.iter().zip(bases.chunks(per_buffer)) {
            self.gpu.upload(buffer, 0, C::affine_bytes(part))?;
        }
        self.gpu.check_alive()?;
        Ok(ResidentBases {
            buffers,
            per_buffer,
            len: bases.len(),
            _curve: PhantomData,
        })
    }

    /// Uploads `bases` and runs one MSM: for one-off use; the prover keeps bases resident.
    pub fn msm_once(&self, bases: &[C::Affine], scalars: &[Scalar]) -> Result<C::Projective> {
        check_lengths(bases.len(), scalars.len())?;
        let resident = self.upload_bases(&bases[..scalars.len()])?;
        self.msm(&resident, scalars)
    }

    /// Σ `scalars[i] · bases[i]` over the first `scalars.len()` resident bases.
    pub fn msm(&self, bases: &ResidentBases<C>, scalars: &[Scalar]) -> Result<C::Projective> {
        self.msm_from(bases, Scalars::Host(scalars))
    }

    /// [`msm`](Self::msm) with the scalars wherever they are.
    pub fn msm_from(
        &self,
        bases: &ResidentBases<C>,
        scalars: Scalars<'_>,
    ) -> Result<C::Projective> {
        check_lengths(bases.len(), scalars.len())?;
        let bases = MsmBases {
            resident: Some(bases),
            host: &[],
        };
        self.msm_streaming(&bases, scalars, MsmLimits::NONE)
    }

    /// Σ `scalars[i] · bases[i]` within `limits` (a smaller workspace), the bases past the
    /// resident prefix streamed from host memory a chunk at a time through two buffers of
    /// the pool, alternating.
    pub fn msm_streaming(
        &self,
        bases: &MsmBases<'_, C>,
        scalars: Scalars<'_>,
        limits: MsmLimits,
    ) -> Result<C::Projective> {
        let [sum] = self
            .msm_together(
                &[MsmJob {
                    bases: *bases,
                    scalars,
                }],
                limits,
            )?
            .try_into()
            .map_err(|_| Error::Internal("one MSM gave other than one sum".into()))?;
        Ok(sum)
    }

    /// Several MSMs within `limits`, chunk by chunk in turn: each job's first chunk, then
    /// each job's second, and so on, each job with a bucket array of its own (the first the
    /// workspace's, the others from the pool). Jobs over the same bases (equal slices and
    /// resident prefix) upload each streamed chunk once for all of them: a batch's proofs
    /// stream a set of bases once instead of once a proof (supraseal-c2's batched MSMs).
    /// Jobs over different bases interleave their chunks, so one job's upload runs beside
    /// another's kernels.
    pub fn msm_together(
        &self,
        jobs: &[MsmJob<'_, C>],
        limits: MsmLimits,
    ) -> Result<Vec<C::Projective>> {
        for job in jobs {
            let bases = job.bases.resident_len().max(job.bases.host.len());
            check_lengths(bases, job.scalars.len())?;
        }
        let running: Vec<MsmJob<'_, C>> = jobs
            .iter()
            .filter(|job| !job.scalars.is_empty())
            .copied()
            .collect();
        let Some(longest) = running.iter().map(|job| job.scalars.len()).max() else {
            return Ok(vec![C::Projective::identity(); jobs.len()]);
        };
        let plan = self.plan_within(longest, limits)?;
        let mut of_job = Vec::with_capacity(running.len());
        let mut sets: Vec<(MsmBases<'_, C>, usize)> = Vec::new();
        for job in &running {
            let streamed = job.scalars.len().saturating_sub(job.bases.resident_len());
            match sets.iter().position(|(bases, _)| bases.same_as(&job.bases)) {
                Some(set) => {
                    sets[set].1 = sets[set].1.max(streamed);
                    of_job.push(set);
                }
                None => {
                    of_job.push(sets.len());
                    sets.push((job.bases, streamed));
                }
            }
        }
        let points = plan
            .chunk
            .min(sets.iter().map(|&(_, s)| s).max().unwrap_or(0));
        let xyzz = C::XYZZ_BYTES as u64;
        let mut buffers = Vec::new();
        let mut extra_buckets = Vec::new();
        let taken = (|| -> Result<()> {
            for &(_, streamed) in &sets {
                buffers.push(match streamed {
                    0 => Vec::new(),
                    _ => self.stream_buffers(points)?,
                });
            }
            for _ in 1..running.len() {
                let bytes = plan.layout.total_buckets() * xyzz;
                extra_buckets.push(self.device_buffer("msm buckets", bytes)?);
            }
            Ok(())
        })();
        let streams = record::BasesStreams {
            of_job,
            buffers,
            points,
        };
        let sums = taken.and_then(|()| {
            let mut workspaces = self.workspaces.lock().unwrap_or_else(|e| e.into_inner());
            let ws = workspaces.for_plan::<C>(&self.gpu, self.pool.as_ref(), &plan)?;
            self.run(&running, &streams, &extra_buckets, &plan, ws)
        });
        if let Some(pool) = &self.pool {
            // `run` waited for the MSMs' last submission, the last to read them (after a
            // failure the engine leaves this device).
            let taken = streams.buffers.into_iter().flatten().chain(extra_buckets);
            for buffer in taken {
                pool.give_back(buffer, None);
            }
        }
        let mut sums = sums?.into_iter();
        jobs.iter()
            .map(|job| match job.scalars.is_empty() {
                true => Ok(C::Projective::identity()),
                false => sums
                    .next()
                    .map(|window_sums| combine_windows::<C>(&window_sums, &plan.layout))
                    .ok_or_else(|| Error::Internal("an MSM of several gave no sums".into())),
            })
            .collect()
    }

    /// Two buffers of `points` bases, from the pool where there is one.
    fn stream_buffers(&self, points: usize) -> Result<Vec<wgpu::Buffer>> {
        let bytes = (points * C::AFFINE_BYTES) as u64;
        (0..2)
            .map(|_| self.device_buffer("streamed bases", bytes))
            .collect()
    }

    /// A storage buffer of `bytes`, from the pool where there is one.
    fn device_buffer(&self, what: &str, bytes: u64) -> Result<wgpu::Buffer> {
        match &self.pool {
            Some(pool) => pool.take(what, bytes),
            None => self
                .gpu
                .allocating(what, bytes, || self.gpu.empty_storage_buffer(what, bytes))?,
        }
    }
}

/// Σ_w 2^(first bit of w) · window_sums[w], by Horner's rule from the top window.
fn combine_windows<C: GpuCurve>(
    window_sums: &[C::Projective],
    layout: &WindowLayout,
) -> C::Projective {
    let mut acc = C::Projective::identity();
    for (w, sum) in window_sums.iter().enumerate().rev() {
        for _ in 0..layout.width(w as u32) {
            acc = acc.double();
        }
        acc += sum;
    }
    acc
}
