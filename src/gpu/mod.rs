//! The wgpu side: adapter and device ([`context`]), shader assembly ([`shader`]), and the small
//! set of helpers every kernel runner uses (pipelines, buffers, dispatch, read-back).

pub mod context;
pub mod shader;

pub use context::{AdapterSelector, Capabilities, GpuContext};
pub use shader::{Program, WideMul};

use crate::error::{Error, Result};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use wgpu::util::DeviceExt;

/// The pipelines of one program variant, built once and reused for every dispatch.
#[derive(Debug)]
pub struct CompiledProgram {
    pub program: Program,
    pub wide_mul: WideMul,
    pipelines: HashMap<&'static str, wgpu::ComputePipeline>,
    /// Wall time of module creation plus every pipeline (the driver's compile).
    pub compile_time: Duration,
}

impl CompiledProgram {
    /// The pipeline of `entry_point`, which must be among those compiled.
    pub fn pipeline(&self, entry_point: &str) -> Result<&wgpu::ComputePipeline> {
        self.pipelines
            .get(entry_point)
            .ok_or_else(|| Error::Pipeline {
                label: format!("{}/{}::{entry_point}", self.program, self.wide_mul),
                message: "entry point was not compiled".into(),
            })
    }
}

impl GpuContext {
    /// Builds the pipelines of `entry_points` in one program variant, turning validation and
    /// driver compile failures into [`Error::Pipeline`] instead of a dead device.
    pub fn compile(
        &self,
        program: Program,
        wide_mul: WideMul,
        entry_points: &[&'static str],
    ) -> Result<CompiledProgram> {
        if wide_mul.needs_int64() && !self.capabilities.int64 {
            return Err(Error::MissingFeature {
                variant: format!("{program}/{wide_mul}"),
                feature: "SHADER_INT64",
                adapter: self.info.name.clone(),
            });
        }
        self.check_alive()?;
        let label = format!("{program}/{wide_mul}");
        let start = Instant::now();
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(&label),
                source: wgpu::ShaderSource::Wgsl(program.source(wide_mul).into()),
            });
        let mut pipelines = HashMap::new();
        for &entry in entry_points {
            let pipeline = self
                .device
                .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(entry),
                    layout: None,
                    module: &module,
                    entry_point: Some(entry),
                    compilation_options: Default::default(),
                    cache: None,
                });
            pipelines.insert(entry, pipeline);
        }
        if let Some(err) = pollster::block_on(scope.pop()) {
            return Err(Error::Pipeline {
                label,
                message: err.to_string(),
            });
        }
        self.check_alive()?;
        let compile_time = start.elapsed();
        log::info!(
            "compiled {label} ({} entry points) in {compile_time:.2?}",
            entry_points.len()
        );
        Ok(CompiledProgram {
            program,
            wide_mul,
            pipelines,
            compile_time,
        })
    }

    /// A storage buffer holding `contents`, refused before allocation when over the limits.
    pub fn storage_buffer(&self, label: &str, contents: &[u8]) -> Result<wgpu::Buffer> {
        self.check_binding_size(contents.len() as u64)?;
        Ok(self
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
            }))
    }

    /// A uniform buffer holding a small parameter block.
    pub fn uniform_buffer(&self, label: &str, contents: &[u8]) -> wgpu::Buffer {
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents,
                usage: wgpu::BufferUsages::UNIFORM,
            })
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

    /// Records one dispatch of `pipeline` over `buffers` (bound at 0, 1, ... in order) and
    /// submits it; returns the submission to wait on.
    pub fn dispatch(
        &self,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
        workgroups: u32,
    ) -> Result<wgpu::SubmissionIndex> {
        self.dispatch_repeated(pipeline, buffers, workgroups, 1)
    }

    /// [`Self::dispatch`] recorded `times` times in one submission.
    pub fn dispatch_repeated(
        &self,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
        workgroups: u32,
        times: u32,
    ) -> Result<wgpu::SubmissionIndex> {
        if workgroups > self.limits.max_compute_workgroups_per_dimension {
            return Err(Error::InvalidInput(format!(
                "{workgroups} workgroups exceed the device's {} per dimension",
                self.limits.max_compute_workgroups_per_dimension
            )));
        }
        let entries: Vec<wgpu::BindGroupEntry> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
        let bind_group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            for _ in 0..times {
                pass.dispatch_workgroups(workgroups, 1, 1);
            }
        }
        Ok(self.queue.submit([encoder.finish()]))
    }

    /// Waits for one submission (not the whole device) to finish.
    pub fn wait_for(&self, submission: wgpu::SubmissionIndex) -> Result<()> {
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(submission),
                timeout: None,
            })
            .map_err(|e| Error::device("waiting for a submission", e))?;
        self.check_alive()
    }

    /// Copies `buffer` back to the host once the work before it has finished.
    pub fn read_buffer(&self, buffer: &wgpu::Buffer) -> Result<Vec<u8>> {
        let size = buffer.size();
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("read-back"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, size);
        let submission = self.queue.submit([encoder.finish()]);
        let (sender, receiver) = std::sync::mpsc::channel();
        staging
            .slice(..)
            .map_async(wgpu::MapMode::Read, move |r| drop(sender.send(r)));
        self.wait_for(submission)?;
        receiver
            .recv()
            .map_err(|e| Error::device("read-back mapping never completed", e))?
            .map_err(|e| Error::device("mapping a read-back buffer", e))?;
        let bytes = staging
            .slice(..)
            .get_mapped_range()
            .map_err(|e| Error::device("reading a mapped buffer", e))?
            .to_vec();
        staging.unmap();
        Ok(bytes)
    }
}
