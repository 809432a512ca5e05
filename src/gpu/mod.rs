//! The wgpu side, knowing nothing of the kernels above it: adapter and device ([`context`]),
//! programs and their validation ([`program`]), typed vectors on the device ([`vector`]),
//! the device memory and the default VRAM budget ([`memory`]), the buffer pool and its
//! VRAM budget ([`pool`]), uploads and read-backs (`transfer`, staging in host memory:
//! `host_staging`),
//! the stage of every wait ([`waits`]), and here the helpers every kernel runner uses
//! (pipelines, buffers, dispatch, the two waits).

pub mod context;
mod host_staging;
pub mod memory;
pub mod pipeline_cache;
pub mod pool;
pub mod program;
mod transfer;
pub mod vector;
pub mod waits;

pub use context::{AdapterSelector, Capabilities, GpuContext};
pub use program::{Binding, EntryPoint, Program, WideMul};
pub use transfer::StagingMemory;
pub use vector::DeviceVector;

use crate::error::{Error, Result};
use std::marker::PhantomData;
use std::time::{Duration, Instant};

/// How long a wait sleeps between two non-blocking polls. Waits never block while holding
/// the device's maintenance lock (see `GpuContext::submit`): a waiter that polled in 200 µs
/// blocking slices re-took the lock before a woken submitter could (std's mutex is not fair),
/// so the staging stage's uploads queued behind the compute stage's waits and two workers
/// kept the GPU busy far less of a batch (docs/benchmarks/proofs-and-batches.md, commit
/// 89b8e8c).
const POLL_INTERVAL: Duration = Duration::from_micros(50);

/// llvmpipe (Mesa's lavapipe and its GL driver) stops an invocation's loops once they have
/// made 65535 trips in all, every loop of the invocation counting, and the invocation goes on
/// with wrong values. We count k + 1 trips for a loop of k iterations, at most one too many
/// (lavapipe: a sparse row of 6553 multiplied entries is right, of 6554 wrong; 65535 plain
/// entries are right). Kernels whose loop lengths depend on their inputs stay under it.
pub const MAX_LOOP_TRIPS: u32 = 65535;

/// The pipelines of one program variant, every entry point built once and reused for every
/// dispatch.
pub struct Compiled<P: Program> {
    pub wide_mul: WideMul,
    /// One per entry point, in `P::Entry::ALL` order.
    pipelines: Vec<wgpu::ComputePipeline>,
    /// The layout every entry point of the program shares (`Program::BINDINGS`).
    pub layout: wgpu::BindGroupLayout,
    /// Wall time of module creation plus every pipeline (the driver's compile).
    pub compile_time: Duration,
    _program: PhantomData<P>,
}

impl<P: Program> std::fmt::Debug for Compiled<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Compiled({}/{})", P::name(), self.wide_mul)
    }
}

impl<P: Program> Compiled<P> {
    pub fn pipeline(&self, entry: P::Entry) -> &wgpu::ComputePipeline {
        let index = P::Entry::ALL
            .iter()
            .position(|&e| e == entry)
            .expect("every entry point is in ALL");
        &self.pipelines[index]
    }
}

/// Workgroups for `threads` invocations of `workgroup_size`, spread over x and y when x alone
/// would pass the per-dimension limit; kernels flatten the id with `num_workgroups`.
pub fn workgroup_grid(threads: u64, workgroup_size: u32, max_per_dimension: u32) -> (u32, u32) {
    let groups = threads.div_ceil(workgroup_size as u64).max(1);
    if groups <= max_per_dimension as u64 {
        (groups as u32, 1)
    } else {
        let y = groups.div_ceil(max_per_dimension as u64);
        (groups.div_ceil(y) as u32, y as u32)
    }
}

/// The distance between uniform blocks of `block` bytes: every dynamic offset must be a
/// multiple of the device's `alignment`, whatever the block size (a 40-byte block at 32-byte
/// alignment takes 64).
fn uniform_stride(block: u64, alignment: u64) -> u64 {
    block.next_multiple_of(alignment.max(1))
}

/// A buffer of uniform blocks, one per dispatch, read through dynamic offsets.
pub struct UniformArray {
    buffer: wgpu::Buffer,
    stride: u64,
}

impl UniformArray {
    pub fn new<T: bytemuck::Pod>(gpu: &GpuContext, blocks: &[T]) -> Result<Self> {
        let stride = uniform_stride(
            std::mem::size_of::<T>() as u64,
            gpu.limits.min_uniform_buffer_offset_alignment as u64,
        );
        let mut bytes = vec![0u8; stride as usize * blocks.len().max(1)];
        for (i, b) in blocks.iter().enumerate() {
            let at = i * stride as usize;
            bytes[at..at + std::mem::size_of::<T>()].copy_from_slice(bytemuck::bytes_of(b));
        }
        let buffer = gpu.uniform_buffer("dispatch parameters", &bytes)?;
        Ok(UniformArray { buffer, stride })
    }

    pub fn binding(&self, size: usize) -> wgpu::BindingResource<'_> {
        wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer: &self.buffer,
            offset: 0,
            size: wgpu::BufferSize::new(size as u64),
        })
    }

    pub fn offset(&self, index: usize) -> u32 {
        (index as u64 * self.stride) as u32
    }
}

impl GpuContext {
    /// Builds the pipelines of every entry point of `P` in one variant, turning validation
    /// and driver compile failures into [`Error::Pipeline`] instead of a dead device.
    pub fn compile<P: Program>(&self, wide_mul: WideMul) -> Result<Compiled<P>> {
        let label = format!("{}/{wide_mul}", P::name());
        if !P::has_variant(wide_mul) {
            return Err(Error::Internal(format!(
                "{label} is not a variant of the program"
            )));
        }
        if wide_mul.needs_int64() && !self.capabilities.int64 {
            return Err(Error::MissingFeature {
                variant: label,
                feature: "SHADER_INT64",
                adapter: self.info.name.clone(),
            });
        }
        self.check_alive()?;
        let start = Instant::now();
        // Validation errors, and the driver's own compile failures (internal errors), become
        // an Err here rather than a dead pipeline discovered later.
        let scopes = [
            wgpu::ErrorFilter::Validation,
            wgpu::ErrorFilter::OutOfMemory,
            wgpu::ErrorFilter::Internal,
        ]
        .map(|filter| self.device.push_error_scope(filter));
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(&label),
                source: wgpu::ShaderSource::Wgsl(P::source(wide_mul).into()),
            });
        let layout_entries: Vec<wgpu::BindGroupLayoutEntry> = P::BINDINGS
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupLayoutEntry {
                binding: i as u32,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: b.layout_type(),
                count: None,
            })
            .collect();
        let layout = self
            .device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(&label),
                entries: &layout_entries,
            });
        let pipeline_layout = self
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(&label),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
        let pipelines = P::Entry::ALL
            .iter()
            .map(|entry| {
                self.device
                    .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                        label: Some(entry.name()),
                        layout: Some(&pipeline_layout),
                        module: &module,
                        entry_point: Some(entry.name()),
                        compilation_options: Default::default(),
                        cache: self.pipeline_cache.as_ref().map(|c| &c.cache),
                    })
            })
            .collect();
        let errors: Vec<String> = scopes
            .into_iter()
            .rev()
            .filter_map(|scope| pollster::block_on(scope.pop()))
            .map(|e| e.to_string())
            .collect();
        if !errors.is_empty() {
            return Err(Error::Pipeline {
                label,
                message: errors.join("; "),
            });
        }
        self.check_alive()?;
        let compile_time = start.elapsed();
        if let Some(cache) = &self.pipeline_cache {
            if let Err(err) = cache.save() {
                log::warn!("pipeline cache not saved: {err}");
            }
        }
        log::info!(
            "compiled {label} ({} entry points) in {compile_time:.2?}",
            P::Entry::ALL.len()
        );
        Ok(Compiled {
            wide_mul,
            pipelines,
            layout,
            compile_time,
            _program: PhantomData,
        })
    }

    /// Runs `allocate` (buffer creation) and turns a device out-of-memory error into
    /// [`Error::OutOfMemory`] naming `what` and its size.
    pub fn allocating<T>(&self, what: &str, bytes: u64, allocate: impl FnOnce() -> T) -> Result<T> {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let value = allocate();
        match pollster::block_on(scope.pop()) {
            Some(err) => Err(Error::OutOfMemory {
                what: what.to_string(),
                bytes,
                message: err.to_string(),
            }),
            None => Ok(value),
        }
    }

    /// A storage buffer holding `contents`, refused before allocation when over the limits.
    pub fn storage_buffer(&self, label: &str, contents: &[u8]) -> Result<wgpu::Buffer> {
        let buffer = self.empty_storage_buffer(label, contents.len() as u64)?;
        self.upload(&buffer, 0, contents)?;
        Ok(buffer)
    }

    /// A storage buffer of `size` bytes (zeros until written), refused before allocation when
    /// over the limits.
    pub fn empty_storage_buffer(&self, label: &str, size: u64) -> Result<wgpu::Buffer> {
        self.check_binding_size(size)?;
        Ok(self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        }))
    }

    /// A uniform buffer holding a small parameter block. Written through its mapping at
    /// creation, as wgpu's `create_buffer_init` does, but a device lost meanwhile is an error
    /// here where `create_buffer_init` panics.
    pub fn uniform_buffer(&self, label: &str, contents: &[u8]) -> Result<wgpu::Buffer> {
        let size = (contents.len() as u64)
            .next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT)
            .max(wgpu::COPY_BUFFER_ALIGNMENT);
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::UNIFORM,
            mapped_at_creation: true,
        });
        let mut padded = contents.to_vec();
        padded.resize(size as usize, 0);
        buffer
            .slice(..)
            .get_mapped_range_mut()
            .map_err(|e| Error::device("writing a uniform buffer", e))?
            .copy_from_slice(&padded);
        buffer.unmap();
        Ok(buffer)
    }

    /// Refuses a binding the device cannot hold, with the numbers.
    pub fn check_binding_size(&self, bytes: u64) -> Result<()> {
        let limit = self
            .limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size);
        if bytes > limit {
            return Err(Error::TooLarge {
                what: "a storage binding",
                needed: bytes,
                limit,
            });
        }
        Ok(())
    }

    /// A bind group of `program` with `resources` at bindings 0, 1, ... in order.
    pub fn bind_group<P: Program>(
        &self,
        program: &Compiled<P>,
        resources: &[wgpu::BindingResource],
    ) -> wgpu::BindGroup {
        let entries: Vec<wgpu::BindGroupEntry> = resources
            .iter()
            .enumerate()
            .map(|(i, r)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: r.clone(),
            })
            .collect();
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &program.layout,
            entries: &entries,
        })
    }

    /// The workgroups that run `threads` invocations of `entry`, spread over x and y.
    pub fn grid(&self, entry: impl EntryPoint, threads: u64) -> (u32, u32) {
        workgroup_grid(
            threads,
            entry.workgroup_size(),
            self.limits.max_compute_workgroups_per_dimension,
        )
    }

    /// Runs `entry` over `threads` invocations with `buffers` bound in order, `times` times in
    /// one submission; returns the submission to wait on.
    pub fn dispatch<P: Program>(
        &self,
        program: &Compiled<P>,
        entry: P::Entry,
        buffers: &[&wgpu::Buffer],
        threads: u64,
        times: u32,
    ) -> Result<wgpu::SubmissionIndex> {
        let resources: Vec<wgpu::BindingResource> =
            buffers.iter().map(|b| b.as_entire_binding()).collect();
        self.dispatch_bound(program, entry, &resources, threads, times)
    }

    /// [`dispatch`](Self::dispatch) with `resources` bound in order: parts of buffers among
    /// them.
    pub fn dispatch_bound<P: Program>(
        &self,
        program: &Compiled<P>,
        entry: P::Entry,
        resources: &[wgpu::BindingResource],
        threads: u64,
        times: u32,
    ) -> Result<wgpu::SubmissionIndex> {
        let pipeline = program.pipeline(entry);
        let bind_group = self.bind_group(program, resources);
        let (x, y) = self.grid(entry, threads);
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            for _ in 0..times {
                pass.dispatch_workgroups(x, y, 1);
            }
        }
        Ok(self.submit([encoder.finish()]))
    }

    /// Submits `commands` to the device's queue.
    ///
    /// wgpu-core 30.0.2 asserts in `Device::maintain` when two maintenances race (a poll
    /// waiting on submission i reads the fence, another thread's maintenance retires i, and
    /// the first then finds the queue empty below i: gfx-rs/wgpu#9958, fixed after this
    /// release). `Queue::submit` runs a maintenance too, so every submission and every poll
    /// here holds one lock, and waits hold it only for non-blocking polls.
    pub fn submit(
        &self,
        commands: impl IntoIterator<Item = wgpu::CommandBuffer>,
    ) -> wgpu::SubmissionIndex {
        let _maintenance = self.maintenance();
        self.queue.submit(commands)
    }

    /// Waits for one submission (not the whole device) to finish.
    pub fn wait_for(&self, submission: wgpu::SubmissionIndex) -> Result<()> {
        waits::record();
        while !self.has_completed(submission.clone())? {
            self.check_alive()?;
            std::thread::sleep(POLL_INTERVAL);
        }
        self.check_alive()
    }

    /// Whether `submission` has completed, without blocking. Like [`wait_for`](Self::wait_for),
    /// it names one submission: nothing in this crate waits on the whole device.
    pub fn has_completed(&self, submission: wgpu::SubmissionIndex) -> Result<bool> {
        let polled = {
            let _maintenance = self.maintenance();
            self.device.poll(wgpu::PollType::Wait {
                submission_index: Some(submission),
                timeout: Some(Duration::ZERO),
            })
        };
        match polled {
            Ok(_) => Ok(true),
            Err(wgpu::PollError::Timeout) => Ok(false),
            Err(e) => Err(Error::device("polling for a submission", e)),
        }
    }

    fn maintenance(&self) -> std::sync::MutexGuard<'_, ()> {
        self.maintenance.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Copies `buffer` back to the host once the work before it has finished.
    pub fn read_buffer(&self, buffer: &wgpu::Buffer) -> Result<Vec<u8>> {
        self.download(buffer, 0, buffer.size())
    }

    /// The contents of a `MAP_READ` buffer once `submission` (which fills it) has finished;
    /// waits for that submission only.
    pub fn read_mapped(
        &self,
        buffer: &wgpu::Buffer,
        submission: wgpu::SubmissionIndex,
    ) -> Result<Vec<u8>> {
        let (sender, receiver) = std::sync::mpsc::channel();
        buffer
            .slice(..)
            .map_async(wgpu::MapMode::Read, move |r| drop(sender.send(r)));
        self.wait_for(submission)?;
        receiver
            .recv()
            .map_err(|e| Error::device("read-back mapping never completed", e))?
            .map_err(|e| Error::device("mapping a read-back buffer", e))?;
        let bytes = buffer
            .slice(..)
            .get_mapped_range()
            .map_err(|e| Error::device("reading a mapped buffer", e))?
            .to_vec();
        buffer.unmap();
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::uniform_stride;

    #[test]
    fn uniform_blocks_start_on_the_alignment_whatever_their_size() {
        for alignment in [16, 32, 64, 256] {
            for block in [8, 16, 32, 40, 48, 200, 256, 260] {
                let stride = uniform_stride(block, alignment);
                assert!(stride >= block, "{block} at {alignment}");
                assert_eq!(stride % alignment, 0, "{block} at {alignment}");
                assert!(stride < block + alignment, "{block} at {alignment}");
            }
        }
        assert_eq!(uniform_stride(40, 32), 64);
    }
}
