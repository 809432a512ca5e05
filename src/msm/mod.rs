//! Multi-scalar multiplication Σ scalar_i · base_i on G1 and G2.
//!
//! The GPU path is Pippenger with signed digits computed on the GPU, a counting sort of
//! (window, bucket) keys done in parallel, bucket accumulation over equal-sized segments of
//! the sorted list (so skewed scalars cannot pile onto one thread), and a parallel bucket
//! reduction; see `shaders/msm.wgsl`. Bases are uploaded once ([`ResidentBases`]) and serve
//! any number of MSMs. Vectors over the binding limit run in chunks that share one bucket
//! array. [`msm_cpu`] is the blstrs reference behind the same seam.

pub mod plan;

pub use plan::{MsmConfig, MsmPlan};

use crate::curve::{GpuCurve, G1, G2};
use crate::error::{Error, Result};
use crate::field::GpuField;
use crate::gpu::pool::{BufferPool, Reservation};
use crate::gpu::{
    workgroup_grid, AdapterSelector, CompiledProgram, GpuContext, Program, UniformArray, WideMul,
};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use group::Group;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, OnceLock};

const MSM_WORKGROUP: u32 = 64;
const SCAN_BLOCK: u64 = 256;
/// Workspaces an `MsmKernels` keeps (see `MsmKernels::workspaces`).
const WORKSPACES_KEPT: usize = 2;

/// The CPU reference: blstrs' multi-exponentiation over the first `scalars.len()` bases.
pub fn msm_cpu<C: GpuCurve>(bases: &[C::Affine], scalars: &[Scalar]) -> Result<C::Projective> {
    check_lengths(bases.len(), scalars.len())?;
    if scalars.is_empty() {
        return Ok(C::Projective::identity());
    }
    Ok(C::multi_exp_cpu(&bases[..scalars.len()], scalars))
}

/// Σ `scalars[i] · bases[i]` on G1 with the process's default GPU: the best adapter (see
/// `AdapterSelector::from_env`), opened and compiled for on first use. Falls back to blstrs,
/// with a warning, when `BELLMAN_NO_GPU` is set (to anything but 0), when no adapter is found,
/// or when the GPU fails. Provers keep bases resident with [`MsmKernels`] instead.
pub fn msm_g1(bases: &[G1Affine], scalars: &[Scalar]) -> Result<G1Projective> {
    static KERNELS: OnceLock<Option<MsmKernels<G1>>> = OnceLock::new();
    default_msm(&KERNELS, bases, scalars)
}

/// [`msm_g1`] on G2.
pub fn msm_g2(bases: &[G2Affine], scalars: &[Scalar]) -> Result<G2Projective> {
    static KERNELS: OnceLock<Option<MsmKernels<G2>>> = OnceLock::new();
    default_msm(&KERNELS, bases, scalars)
}

/// Whether `BELLMAN_NO_GPU` asks for the CPU path (set to anything but `0`).
pub fn gpu_disabled_by_env() -> bool {
    std::env::var("BELLMAN_NO_GPU").is_ok_and(|v| v != "0")
}

fn default_gpu() -> Option<&'static GpuContext> {
    static GPU: OnceLock<Option<GpuContext>> = OnceLock::new();
    GPU.get_or_init(|| {
        if gpu_disabled_by_env() {
            log::info!("BELLMAN_NO_GPU is set: MSMs run on the CPU");
            return None;
        }
        GpuContext::new(&AdapterSelector::default())
            .map_err(|e| log::warn!("MSMs run on the CPU: {e}"))
            .ok()
    })
    .as_ref()
}

fn default_msm<C: GpuCurve>(
    kernels: &'static OnceLock<Option<MsmKernels<C>>>,
    bases: &[C::Affine],
    scalars: &[Scalar],
) -> Result<C::Projective> {
    let kernels = kernels.get_or_init(|| {
        let gpu = default_gpu()?;
        MsmKernels::new(gpu, gpu.preferred_wide_mul(), MsmConfig::default())
            .map_err(|e| log::warn!("{} MSMs run on the CPU: {e}", C::NAME))
            .ok()
    });
    match kernels {
        Some(k) => match k.msm_once(bases, scalars) {
            Err(e) if !e.is_bad_input() => {
                log::warn!("GPU {} MSM failed, computing it on the CPU: {e}", C::NAME);
                msm_cpu::<C>(bases, scalars)
            }
            ok => ok,
        },
        None => msm_cpu::<C>(bases, scalars),
    }
}

fn check_lengths(bases: usize, scalars: usize) -> Result<()> {
    if scalars > bases {
        return Err(Error::InvalidInput(format!(
            "{scalars} scalars but only {bases} bases"
        )));
    }
    Ok(())
}

/// Mirrors `MsmParams` in msm.wgsl.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct MsmParams {
    count: u32,
    window_bits: u32,
    windows: u32,
    buckets: u32,
    segment: u32,
    level: u32,
    groups: u32,
    _pad: u32,
}

/// Where an MSM's scalars are: in host memory, or already on the device in equal parts (an
/// NTT's output, so the H polynomial goes from its transform to its MSM without a round trip).
#[derive(Clone, Copy)]
pub enum ScalarSource<'a> {
    Host(&'a [Scalar]),
    Device {
        /// Buffers of `part_len` scalars each, in order.
        parts: &'a [wgpu::Buffer],
        part_len: usize,
        /// Scalars to use, from the start.
        len: usize,
    },
}

impl ScalarSource<'_> {
    pub fn len(&self) -> usize {
        match self {
            ScalarSource::Host(scalars) => scalars.len(),
            ScalarSource::Device { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Puts scalars `first..first + len` at the start of `target`: an upload for host
    /// scalars, copies recorded in `encoder` for device ones.
    fn stage(
        &self,
        gpu: &GpuContext,
        encoder: &mut wgpu::CommandEncoder,
        target: &wgpu::Buffer,
        first: usize,
        len: usize,
    ) -> Result<()> {
        const BYTES: u64 = std::mem::size_of::<Scalar>() as u64;
        match *self {
            ScalarSource::Host(scalars) => {
                gpu.upload(target, 0, Scalar::as_bytes(&scalars[first..first + len]))
            }
            ScalarSource::Device {
                parts, part_len, ..
            } => {
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

/// The MSM kernels of one curve on one device, with the device buffers of the last plan kept
/// for the next call.
pub struct MsmKernels<C: GpuCurve> {
    gpu: GpuContext,
    msm: Arc<CompiledProgram>,
    scan: Arc<CompiledProgram>,
    config: MsmConfig,
    /// Workspaces of recent plans, most recent last: a prover alternates between a few MSM
    /// sizes (H, L, A near n; B smaller), and reallocating gigabytes for each cost more than
    /// the MSM's sort.
    workspaces: Mutex<Vec<Workspace>>,
    /// Workspaces count against this pool's VRAM budget, when there is one.
    pool: Option<BufferPool>,
    profile: Mutex<Vec<(String, f64)>>,
    _curve: PhantomData<C>,
}

/// Device buffers sized for one plan.
struct Workspace {
    plan: MsmPlan,
    scalars: wgpu::Buffer,
    counts: wgpu::Buffer,
    cursor: wgpu::Buffer,
    sorted: wgpu::Buffer,
    keys: [wgpu::Buffer; 2],
    points: [wgpu::Buffer; 2],
    buckets: wgpu::Buffer,
    /// Buckets of the second and later chunks, merged into `buckets` after each.
    chunk_buckets: wgpu::Buffer,
    lengths: wgpu::Buffer,
    sums: wgpu::Buffer,
    /// Block totals of each scan level.
    scan_sums: Vec<wgpu::Buffer>,
    readback: wgpu::Buffer,
    /// Its bytes in the VRAM budget, while it lives.
    _budget: Option<Reservation>,
}

fn storage(gpu: &GpuContext, label: &str, size: u64) -> wgpu::Buffer {
    gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: size.max(16).next_multiple_of(4),
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

/// The lengths of each scan level: the data, then block totals until one block remains.
fn scan_levels(len: u64) -> Vec<u64> {
    let mut levels = vec![len];
    while *levels.last().expect("never empty") > SCAN_BLOCK {
        let last = *levels.last().expect("never empty");
        levels.push(last.div_ceil(SCAN_BLOCK));
    }
    levels
}

impl Workspace {
    fn new<C: GpuCurve>(gpu: &GpuContext, plan: &MsmPlan) -> Self {
        let xyzz = C::XYZZ_BYTES as u64;
        let slots = plan.count_slots();
        let bucket_bytes = plan.windows as u64 * plan.buckets as u64 * xyzz;
        Workspace {
            plan: plan.clone(),
            scalars: storage(gpu, "msm scalars", plan.chunk as u64 * 32),
            counts: storage(gpu, "msm counts", slots * 4),
            cursor: storage(gpu, "msm cursor", slots * 4),
            sorted: storage(gpu, "msm sorted", plan.max_entries() * 8),
            keys: ["msm keys a", "msm keys b"].map(|l| storage(gpu, l, plan.max_partials() * 4)),
            points: ["msm partials a", "msm partials b"]
                .map(|l| storage(gpu, l, plan.max_partials() * xyzz)),
            buckets: storage(gpu, "msm buckets", bucket_bytes),
            chunk_buckets: storage(
                gpu,
                "msm chunk buckets",
                if plan.chunk < plan.n {
                    bucket_bytes
                } else {
                    xyzz
                },
            ),
            lengths: storage(gpu, "msm lengths", 4 * (plan.level_bounds.len() as u64 + 1)),
            sums: storage(
                gpu,
                "msm group sums",
                (plan.windows * plan.groups) as u64 * xyzz,
            ),
            scan_sums: scan_levels(slots)
                .iter()
                .map(|&len| storage(gpu, "scan block sums", len.div_ceil(SCAN_BLOCK) * 4))
                .collect(),
            readback: gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("msm window sums"),
                size: plan.windows as u64 * xyzz,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
            _budget: None,
        }
    }
}

impl<C: GpuCurve> MsmKernels<C> {
    /// Compiles the MSM kernels of curve `C` for one wide-multiply path.
    pub fn new(gpu: &GpuContext, wide_mul: WideMul, config: MsmConfig) -> Result<Self> {
        let needed = Program::MsmG1.bindings().len() as u32;
        if gpu.limits.max_storage_buffers_per_shader_stage < needed - 1 {
            return Err(Error::Device(format!(
                "{} allows {} storage buffers per shader stage; the MSM needs {}",
                gpu.describe(),
                gpu.limits.max_storage_buffers_per_shader_stage,
                needed - 1
            )));
        }
        let msm = gpu.compile(
            C::MSM_PROGRAM,
            wide_mul,
            &[
                "msm_count",
                "msm_scatter",
                "msm_accumulate_bases",
                "msm_accumulate_partials",
                "msm_merge_buckets",
                "msm_reduce_groups",
                "msm_sum_pairs",
            ],
        )?;
        let scan = gpu.compile(
            Program::Scan,
            WideMul::Portable,
            &["scan_blocks", "scan_add_offsets"],
        )?;
        Ok(MsmKernels {
            gpu: gpu.clone(),
            msm: Arc::new(msm),
            scan: Arc::new(scan),
            config,
            workspaces: Mutex::new(Vec::new()),
            pool: None,
            profile: Mutex::new(Vec::new()),
            _curve: PhantomData,
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
            workspaces: Mutex::new(Vec::new()),
            pool: self.pool.clone(),
            profile: Mutex::new(Vec::new()),
            _curve: PhantomData,
        }
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

    /// The plan an MSM of `n` points would follow.
    pub fn plan(&self, n: usize) -> Result<MsmPlan> {
        let mut config = self.config.clone();
        config.segment = Some(config.segment.unwrap_or(C::SEGMENT));
        if config.reduction_threads.is_none() && self.gpu.info.device_type == wgpu::DeviceType::Cpu
        {
            config.reduction_threads = Some(1024);
        }
        MsmPlan::new(
            n,
            C::AFFINE_BYTES as u64,
            C::XYZZ_BYTES as u64,
            self.binding_limit(),
            &config,
        )
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
        self.msm_from(bases, ScalarSource::Host(scalars))
    }

    /// [`msm`](Self::msm) with the scalars wherever they are.
    pub fn msm_from(
        &self,
        bases: &ResidentBases<C>,
        scalars: ScalarSource<'_>,
    ) -> Result<C::Projective> {
        check_lengths(bases.len(), scalars.len())?;
        if scalars.is_empty() {
            return Ok(C::Projective::identity());
        }
        let plan = self.plan(scalars.len())?;
        let mut cache = self.workspaces.lock().unwrap_or_else(|e| e.into_inner());
        match cache.iter().position(|w| plan.fits_in(&w.plan)) {
            Some(i) => {
                let ws = cache.remove(i);
                cache.push(ws);
            }
            None => {
                if cache.len() >= WORKSPACES_KEPT {
                    cache.remove(0); // free the oldest before allocating
                }
                let bytes = plan.workspace_bytes(C::XYZZ_BYTES as u64);
                let budget = match &self.pool {
                    Some(pool) => Some(loop {
                        match pool.reserve("an MSM workspace", bytes) {
                            Err(Error::VramBudget { .. }) if !cache.is_empty() => {
                                cache.remove(0); // its bytes go back to the budget
                            }
                            reserved => break reserved?,
                        }
                    }),
                    None => None,
                };
                let allocate = || {
                    self.gpu.allocating("the MSM workspace", bytes, || {
                        Workspace::new::<C>(&self.gpu, &plan)
                    })
                };
                let ws = match allocate() {
                    Err(Error::OutOfMemory { .. }) if !cache.is_empty() => {
                        cache.clear();
                        allocate()?
                    }
                    other => other?,
                };
                cache.push(Workspace {
                    _budget: budget,
                    ..ws
                });
            }
        }
        let ws = cache.last().expect("just filled");
        let window_sums = self.run(bases, scalars, &plan, ws)?;
        Ok(combine_windows::<C>(&window_sums, plan.window_bits))
    }

    /// Records and submits every chunk, then the reduction; returns each window's sum.
    fn run(
        &self,
        bases: &ResidentBases<C>,
        scalars: ScalarSource<'_>,
        plan: &MsmPlan,
        ws: &Workspace,
    ) -> Result<Vec<C::Projective>> {
        let gpu = &self.gpu;
        let xyzz = C::XYZZ_BYTES as u64;
        // Chunks never straddle two base buffers.
        let mut chunks = Vec::new(); // (buffer index, first point in buffer, first scalar, len)
        let mut first = 0usize;
        while first < scalars.len() {
            let buffer = first / bases.per_buffer;
            let in_buffer = first % bases.per_buffer;
            let room = bases.buffers[buffer].1 - in_buffer;
            let len = plan.chunk.min(room).min(scalars.len() - first);
            chunks.push((buffer, in_buffer, first, len));
            first += len;
        }

        let levels = plan.level_bounds.len();
        let params_of = |count: usize, level: usize| MsmParams {
            count: count as u32,
            window_bits: plan.window_bits,
            windows: plan.windows,
            buckets: plan.buckets,
            segment: plan.segment,
            level: level as u32,
            groups: plan.groups,
            _pad: 0,
        };
        let mut blocks: Vec<MsmParams> = chunks
            .iter()
            .flat_map(|&(_, _, _, len)| (0..levels).map(move |l| params_of(len, l)))
            .collect();
        let reduce_block = blocks.len();
        blocks.push(params_of(0, 0));
        let strides = plan.tree_strides();
        blocks.extend(strides.iter().map(|&s| params_of(0, s as usize)));
        let params = UniformArray::new(gpu, &blocks);
        let timer = PassTimer::new(gpu, self.config.profile, 4 * chunks.len() + 2);
        let scan_lens = scan_levels(plan.count_slots());
        let scan_params = UniformArray::new(
            gpu,
            &scan_lens
                .iter()
                .map(|&l| [l as u32, 0, 0, 0])
                .collect::<Vec<_>>(),
        );
        let scan_groups: Vec<wgpu::BindGroup> = (0..scan_lens.len())
            .map(|level| {
                let data = if level == 0 {
                    &ws.counts
                } else {
                    &ws.scan_sums[level - 1]
                };
                gpu.bind_group(
                    &self.scan,
                    &[
                        scan_params.binding(16),
                        data.as_entire_binding(),
                        ws.scan_sums[level].as_entire_binding(),
                    ],
                )
            })
            .collect();

        let grid = |threads: u64, size: u32| {
            workgroup_grid(
                threads,
                size,
                gpu.limits.max_compute_workgroups_per_dimension,
            )
        };
        let bases_binding = |buffer: usize, at: usize, len: usize| {
            wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &bases.buffers[buffer].0,
                offset: (at * C::AFFINE_BYTES) as u64,
                size: wgpu::BufferSize::new((len * C::AFFINE_BYTES) as u64),
            })
        };
        // Ping-pong: even levels read list b and write list a, odd levels the reverse.
        // `chunk_target` binds the chunk buckets where the kernels write `buckets`.
        let msm_group = |bases: wgpu::BindingResource, parity: usize, chunk_target: bool| {
            let (inp, out) = (1 - parity, parity);
            let (target, other) = if chunk_target {
                (&ws.chunk_buckets, &ws.buckets)
            } else {
                (&ws.buckets, &ws.chunk_buckets)
            };
            gpu.bind_group(
                &self.msm,
                &[
                    params.binding(std::mem::size_of::<MsmParams>()),
                    ws.scalars.as_entire_binding(),
                    bases,
                    ws.counts.as_entire_binding(),
                    ws.cursor.as_entire_binding(),
                    ws.sorted.as_entire_binding(),
                    ws.keys[inp].as_entire_binding(),
                    ws.points[inp].as_entire_binding(),
                    ws.keys[out].as_entire_binding(),
                    ws.points[out].as_entire_binding(),
                    target.as_entire_binding(),
                    ws.lengths.as_entire_binding(),
                    ws.sums.as_entire_binding(),
                    other.as_entire_binding(),
                ],
            )
        };
        let slots = plan.count_slots();

        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        encoder.clear_buffer(&ws.buckets, 0, None);
        for (c, &(buffer, at, first, len)) in chunks.iter().enumerate() {
            scalars.stage(gpu, &mut encoder, &ws.scalars, first, len)?;
            let merged = c > 0;
            let groups =
                [0, 1].map(|parity| msm_group(bases_binding(buffer, at, len), parity, merged));
            let base_params = params.offset(c * levels);
            let point_grid = grid(len as u64, MSM_WORKGROUP);

            encoder.clear_buffer(&ws.counts, 0, None);
            if merged {
                encoder.clear_buffer(&ws.chunk_buckets, 0, None);
            }
            {
                let mut pass = encoder.begin_compute_pass(&timer.pass("count + scan"));
                pass.set_pipeline(self.msm.pipeline("msm_count")?);
                pass.set_bind_group(0, &groups[0], &[base_params]);
                pass.dispatch_workgroups(point_grid.0, point_grid.1, 1);
                self.record_scan(&mut pass, &scan_lens, &scan_groups, &scan_params)?;
            }
            encoder.copy_buffer_to_buffer(&ws.counts, 0, &ws.cursor, 0, slots * 4);
            encoder.copy_buffer_to_buffer(&ws.counts, (slots - 1) * 4, &ws.lengths, 0, 4);
            {
                let mut pass = encoder.begin_compute_pass(&timer.pass("scatter"));
                pass.set_pipeline(self.msm.pipeline("msm_scatter")?);
                pass.set_bind_group(0, &groups[0], &[base_params]);
                pass.dispatch_workgroups(point_grid.0, point_grid.1, 1);
            }
            {
                let mut pass = encoder.begin_compute_pass(&timer.pass("accumulate"));
                for (level, &bound) in plan.level_bounds.iter().enumerate() {
                    let entry = if level == 0 {
                        "msm_accumulate_bases"
                    } else {
                        "msm_accumulate_partials"
                    };
                    pass.set_pipeline(self.msm.pipeline(entry)?);
                    let (x, y) = grid(bound.div_ceil(plan.segment as u64), MSM_WORKGROUP);
                    pass.set_bind_group(
                        0,
                        &groups[level % 2],
                        &[params.offset(c * levels + level)],
                    );
                    pass.dispatch_workgroups(x, y, 1);
                }
            }
            if merged {
                let main = msm_group(bases_binding(buffer, at, len), 0, false);
                let mut pass = encoder.begin_compute_pass(&timer.pass("merge chunk"));
                pass.set_pipeline(self.msm.pipeline("msm_merge_buckets")?);
                pass.set_bind_group(0, &main, &[base_params]);
                let (x, y) = grid(plan.windows as u64 * plan.buckets as u64, MSM_WORKGROUP);
                pass.dispatch_workgroups(x, y, 1);
            }
            // The next chunk rewrites the scalars: submit this one first.
            gpu.submit([encoder.finish()]);
            encoder = gpu.device.create_command_encoder(&Default::default());
        }

        let (buffer, at, _, len) = chunks[0];
        let group = msm_group(bases_binding(buffer, at, len), 0, false);
        {
            let mut pass = encoder.begin_compute_pass(&timer.pass("reduce buckets"));
            pass.set_bind_group(0, &group, &[params.offset(reduce_block)]);
            pass.set_pipeline(self.msm.pipeline("msm_reduce_groups")?);
            let (x, y) = grid((plan.windows * plan.groups) as u64, MSM_WORKGROUP);
            pass.dispatch_workgroups(x, y, 1);
        }
        {
            let mut pass = encoder.begin_compute_pass(&timer.pass("sum groups"));
            pass.set_pipeline(self.msm.pipeline("msm_sum_pairs")?);
            for (k, &stride) in strides.iter().enumerate() {
                let pairs = (plan.groups as u64).div_ceil(2 * stride as u64);
                let (x, y) = grid(plan.windows as u64 * pairs, MSM_WORKGROUP);
                pass.set_bind_group(0, &group, &[params.offset(reduce_block + 1 + k)]);
                pass.dispatch_workgroups(x, y, 1);
            }
        }
        for w in 0..plan.windows as u64 {
            let from = w * plan.groups as u64 * xyzz;
            encoder.copy_buffer_to_buffer(&ws.sums, from, &ws.readback, w * xyzz, xyzz);
        }
        timer.resolve(&mut encoder);
        let submission = gpu.submit([encoder.finish()]);
        let bytes = gpu.read_mapped(&ws.readback, submission.clone())?;
        let sums = bytes.chunks(xyzz as usize).map(C::from_xyzz).collect();
        *self.profile.lock().unwrap_or_else(|e| e.into_inner()) = timer.read(gpu, submission)?;
        Ok(sums)
    }

    /// Exclusive scan of the counts in place, level by level (see scan.wgsl).
    fn record_scan(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        lens: &[u64],
        groups: &[wgpu::BindGroup],
        params: &UniformArray,
    ) -> Result<()> {
        let max = self.gpu.limits.max_compute_workgroups_per_dimension;
        pass.set_pipeline(self.scan.pipeline("scan_blocks")?);
        for (level, &len) in lens.iter().enumerate() {
            let (x, y) = workgroup_grid(len, SCAN_BLOCK as u32, max);
            pass.set_bind_group(0, &groups[level], &[params.offset(level)]);
            pass.dispatch_workgroups(x, y, 1);
        }
        pass.set_pipeline(self.scan.pipeline("scan_add_offsets")?);
        for (level, &len) in lens.iter().enumerate().rev().skip(1) {
            let (x, y) = workgroup_grid(len, SCAN_BLOCK as u32, max);
            pass.set_bind_group(0, &groups[level], &[params.offset(level)]);
            pass.dispatch_workgroups(x, y, 1);
        }
        Ok(())
    }
}

/// Timestamps around compute passes, when asked for and available; otherwise every pass
/// descriptor is the default and nothing is recorded.
struct PassTimer {
    queries: Option<(wgpu::QuerySet, wgpu::Buffer, wgpu::Buffer)>,
    labels: std::cell::RefCell<Vec<&'static str>>,
    capacity: usize,
}

impl PassTimer {
    fn new(gpu: &GpuContext, enabled: bool, passes: usize) -> Self {
        let queries = (enabled && gpu.capabilities.timestamps).then(|| {
            let count = 2 * passes as u32;
            let set = gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("msm pass timestamps"),
                ty: wgpu::QueryType::Timestamp,
                count,
            });
            let size = count as u64 * 8;
            let resolve = gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("timestamps"),
                size,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let read = gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("timestamps read-back"),
                size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            (set, resolve, read)
        });
        PassTimer {
            queries,
            labels: Default::default(),
            capacity: passes,
        }
    }

    fn pass(&self, label: &'static str) -> wgpu::ComputePassDescriptor<'_> {
        let mut labels = self.labels.borrow_mut();
        let timestamp_writes = match &self.queries {
            Some((set, _, _)) if labels.len() < self.capacity => {
                let index = 2 * labels.len() as u32;
                labels.push(label);
                Some(wgpu::ComputePassTimestampWrites {
                    query_set: set,
                    beginning_of_pass_write_index: Some(index),
                    end_of_pass_write_index: Some(index + 1),
                })
            }
            _ => None,
        };
        wgpu::ComputePassDescriptor {
            label: Some(label),
            timestamp_writes,
        }
    }

    fn resolve(&self, encoder: &mut wgpu::CommandEncoder) {
        if let Some((set, resolve, read)) = &self.queries {
            let used = 2 * self.labels.borrow().len() as u32;
            encoder.resolve_query_set(set, 0..used, resolve, 0);
            encoder.copy_buffer_to_buffer(resolve, 0, read, 0, used as u64 * 8);
        }
    }

    /// (label, milliseconds) per pass, summed over passes of the same label.
    fn read(
        &self,
        gpu: &GpuContext,
        submission: wgpu::SubmissionIndex,
    ) -> Result<Vec<(String, f64)>> {
        let Some((_, _, read)) = &self.queries else {
            return Ok(Vec::new());
        };
        let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(&gpu.read_mapped(read, submission)?);
        let period_ns = gpu.queue.get_timestamp_period() as f64;
        let mut out: Vec<(String, f64)> = Vec::new();
        for (i, label) in self.labels.borrow().iter().enumerate() {
            let ms = ticks[2 * i + 1].saturating_sub(ticks[2 * i]) as f64 * period_ns / 1e6;
            match out.iter_mut().find(|(l, _)| l == label) {
                Some((_, total)) => *total += ms,
                None => out.push((label.to_string(), ms)),
            }
        }
        Ok(out)
    }
}

/// Σ_w 2^(c·w) · window_sums[w], by Horner's rule from the top window.
fn combine_windows<C: GpuCurve>(window_sums: &[C::Projective], window_bits: u32) -> C::Projective {
    let mut acc = C::Projective::identity();
    for sum in window_sums.iter().rev() {
        for _ in 0..window_bits {
            acc = acc.double();
        }
        acc += sum;
    }
    acc
}
