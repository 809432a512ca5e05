//! Typed vectors on the device: the NTT transforms them, the MSM reads its scalars from them.

use std::marker::PhantomData;
use std::sync::Mutex;

use super::pool::BufferPool;
use super::GpuContext;
use crate::error::{Error, Result};
use crate::field::GpuField;

/// How a vector of 2^log_n elements is cut into buffers: 2^part_bits equal parts, each a power
/// of two of elements within the binding limit, and no more parts than elements in a part
/// (an NTT's bit reversal between parts relies on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartLayout {
    pub log_n: u32,
    pub part_bits: u32,
}

impl PartLayout {
    /// The layout of 2^log_n elements of `element_bytes` each under `max_part_bytes`.
    pub fn new(log_n: u32, element_bytes: u64, max_part_bytes: u64) -> Result<Self> {
        let fit = max_part_bytes / element_bytes;
        if fit == 0 {
            return Err(Error::TooLarge {
                what: "one element",
                needed: element_bytes,
                limit: max_part_bytes,
            });
        }
        let mut part_bits = 0;
        while (1u64 << (log_n - part_bits)) > fit || (log_n - part_bits) < part_bits {
            if (log_n - part_bits) <= part_bits {
                return Err(Error::TooLarge {
                    what: "a vector of this size in parts",
                    needed: element_bytes << log_n,
                    limit: max_part_bytes,
                });
            }
            part_bits += 1;
        }
        Ok(PartLayout { log_n, part_bits })
    }

    pub fn parts(self) -> usize {
        1 << self.part_bits
    }

    pub fn part_len(self) -> usize {
        1 << (self.log_n - self.part_bits)
    }

    /// Elements in all the parts.
    pub fn elements(self) -> usize {
        1 << self.log_n
    }
}

/// Elements of `T` on the device, in equal parts of one buffer each (a vector may be longer
/// than one binding holds: 2^27 Fr is 4 GiB, NVIDIA binds 2 GiB). Pooled parts go back to
/// their pool when the vector drops, fenced by the last submission that used them.
pub struct DeviceVector<T: GpuField> {
    parts: Vec<wgpu::Buffer>,
    layout: PartLayout,
    pool: Option<BufferPool>,
    last_use: Mutex<Option<wgpu::SubmissionIndex>>,
    _element: PhantomData<T>,
}

impl<T: GpuField> DeviceVector<T> {
    /// `values` zero-padded to the layout's length, in buffers from `pool` (or fresh ones).
    pub fn upload(
        gpu: &GpuContext,
        pool: Option<&BufferPool>,
        values: &[T],
        layout: PartLayout,
    ) -> Result<Self> {
        if values.len() > layout.elements() {
            return Err(Error::InvalidInput(format!(
                "{} values do not fit a vector of 2^{}",
                values.len(),
                layout.log_n
            )));
        }
        let part_bytes = (layout.part_len() * std::mem::size_of::<T>()) as u64;
        let parts = match pool {
            Some(pool) => (0..layout.parts())
                .map(|_| pool.take("a vector part", part_bytes))
                .collect::<Result<Vec<_>>>()?,
            None => gpu.allocating("a vector", part_bytes * layout.parts() as u64, || {
                (0..layout.parts())
                    .map(|_| gpu.empty_storage_buffer("vector part", part_bytes))
                    .collect::<Result<Vec<_>>>()
            })??,
        };
        let vector = DeviceVector {
            parts,
            layout,
            pool: pool.cloned(),
            last_use: Mutex::new(None),
            _element: PhantomData,
        };
        // Pooled buffers hold an earlier vector: zero what the values do not cover.
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        for (p, part) in vector.parts.iter().enumerate() {
            let values = values.get(p * layout.part_len()..).unwrap_or(&[]);
            let values = &values[..values.len().min(layout.part_len())];
            gpu.upload(part, 0, T::as_bytes(values))?;
            let written = std::mem::size_of_val(values) as u64;
            if written < part_bytes {
                encoder.clear_buffer(part, written, None);
            }
        }
        vector.used_by(&gpu.submit([encoder.finish()]));
        Ok(vector)
    }

    /// A vector whose every part is `buffer` (one part's length), for passes that take one
    /// part at a time; it owns nothing and gives nothing back to a pool.
    pub fn repeating(buffer: &wgpu::Buffer, layout: PartLayout) -> Self {
        DeviceVector {
            parts: vec![buffer.clone(); layout.parts()],
            layout,
            pool: None,
            last_use: Mutex::new(None),
            _element: PhantomData,
        }
    }

    /// Every element, read back.
    pub fn download(&self, gpu: &GpuContext) -> Result<Vec<T>> {
        let mut out = crate::field::zeroed_vec::<T>(self.len());
        self.download_into(gpu, &mut out)?;
        Ok(out)
    }

    /// Every element, read back into `out` (of the vector's length). Host memory written
    /// before takes the bytes at copy speed; fresh memory faults in a page every 4 KiB as
    /// it is written (a plain copy into 1 GiB: 2.4 s fresh, 0.08 s written before, on a
    /// 2-core VM).
    pub fn download_into(&self, gpu: &GpuContext, out: &mut [T]) -> Result<()> {
        if out.len() != self.len() {
            return Err(Error::Internal(format!(
                "reading back {} elements into {}",
                self.len(),
                out.len()
            )));
        }
        for (part, values) in self
            .parts
            .iter()
            .zip(out.chunks_mut(self.layout.part_len()))
        {
            gpu.download_into(part, 0, T::as_bytes_mut(values))?;
            T::reduce_read_back(values);
        }
        Ok(())
    }

    pub fn layout(&self) -> PartLayout {
        self.layout
    }

    pub fn len(&self) -> usize {
        self.layout.elements()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn parts(&self) -> &[wgpu::Buffer] {
        &self.parts
    }

    /// Records that `submission` uses the vector: its buffers go back to the pool only once
    /// the last such submission has completed.
    pub fn used_by(&self, submission: &wgpu::SubmissionIndex) {
        *self.last_use.lock().unwrap_or_else(|e| e.into_inner()) = Some(submission.clone());
    }
}

impl<T: GpuField> Drop for DeviceVector<T> {
    fn drop(&mut self) {
        if let Some(pool) = &self.pool {
            let fence = self
                .last_use
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            for part in self.parts.drain(..) {
                pool.give_back(part, fence.clone());
            }
        }
    }
}
