//! Timestamps around an MSM's compute passes (`MsmConfig::profile`), when the device has them.

use crate::error::Result;
use crate::gpu::GpuContext;
use std::borrow::Cow;

/// Timestamps around compute passes, when asked for and available; otherwise every pass
/// descriptor is the default and nothing is recorded.
pub(super) struct PassTimer {
    queries: Option<(wgpu::QuerySet, wgpu::Buffer, wgpu::Buffer)>,
    labels: std::cell::RefCell<Vec<Cow<'static, str>>>,
    capacity: usize,
}

impl PassTimer {
    pub(super) fn new(gpu: &GpuContext, enabled: bool, passes: usize) -> Self {
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

    pub(super) fn pass(&self, label: &'static str) -> wgpu::ComputePassDescriptor<'_> {
        self.pass_timed_as(label, || label)
    }

    /// A pass labelled `label`, its time reported under the name `timed_as` makes (one of
    /// several passes of one kind, each its own line in a profile), made only when timed.
    pub(super) fn pass_timed_as<T: Into<Cow<'static, str>>>(
        &self,
        label: &'static str,
        timed_as: impl FnOnce() -> T,
    ) -> wgpu::ComputePassDescriptor<'_> {
        let mut labels = self.labels.borrow_mut();
        let timestamp_writes = match &self.queries {
            Some((set, _, _)) if labels.len() < self.capacity => {
                let index = 2 * labels.len() as u32;
                labels.push(timed_as().into());
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

    pub(super) fn resolve(&self, encoder: &mut wgpu::CommandEncoder) {
        if let Some((set, resolve, read)) = &self.queries {
            let used = 2 * self.labels.borrow().len() as u32;
            encoder.resolve_query_set(set, 0..used, resolve, 0);
            encoder.copy_buffer_to_buffer(resolve, 0, read, 0, used as u64 * 8);
        }
    }

    /// (label, milliseconds) per pass, summed over passes of the same label.
    pub(super) fn read(
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
            match out.iter_mut().find(|(l, _)| l == label.as_ref()) {
                Some((_, total)) => *total += ms,
                None => out.push((label.to_string(), ms)),
            }
        }
        Ok(out)
    }
}
