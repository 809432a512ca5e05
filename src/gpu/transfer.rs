//! Host <-> device copies through a few reusable staging buffers.
//!
//! `create_buffer_init` and `write_buffer` allocate fresh host-visible staging memory for every
//! call, and a read-back buffer per call does the same: for the hundreds of megabytes one proof
//! moves, allocating (and, on discrete GPUs, pinning) that memory each time cost more than the
//! copies, many times the kernels' time (docs/benchmarks/transfers.md). Here chunk-sized staging buffers are made once per device and reused: while the
//! GPU copies one chunk, the CPU fills or drains the next.
//!
//! An upload never waits for a staging buffer whose copy is still queued (it may sit behind
//! another worker's kernels, and waiting for it would tie this worker to that work): it takes
//! another, making one if needed, up to a cap. Every wait is on a submission made here (a
//! chunk's own copy), never on the whole device. The slots' lock is held only to take or give
//! back a slot, never while a chunk is written: a worker's small uploads (a gather's
//! coefficients, a vector's parts) do not wait for another worker's 4 GB of staging.

use std::sync::mpsc;
use std::sync::Mutex;

use super::host_staging::{self, HostMapping};
use crate::error::{Error, Result};

/// Bytes per staging buffer. Big enough that per-chunk overhead vanishes, small enough that a
/// few of them in flight cost little host memory.
const CHUNK: u64 = 32 << 20;
/// Read-back staging buffers: one being drained on the CPU, the others in copy.
const SLOTS: usize = 3;
/// Most upload staging buffers (1 GiB): beyond this, an upload waits for the oldest idle
/// slot's copy (and makes one more only when every slot is being written). A VRAM budget
/// may lower it ([`super::GpuContext::limit_upload_staging`]): drivers with resizable BAR
/// place these mapped buffers in device memory.
const MAX_UPLOAD_SLOTS: usize = 32;

type MapResult = std::result::Result<(), wgpu::BufferAsyncError>;

/// A staging buffer and, while the GPU may still use it, the submission that last did and
/// (for buffers wgpu maps) the map request that completes after it.
struct Slot {
    buffer: wgpu::Buffer,
    /// Where the buffer is host memory mapped for its life; `None`: wgpu maps it.
    host: Option<HostMapping>,
    pending: Option<(wgpu::SubmissionIndex, Option<mpsc::Receiver<MapResult>>)>,
}

/// Where upload staging buffers are made.
///
/// On the H200 (docs/benchmarks/transfers.md) host memory uploads 1.4x faster alone (35
/// against 25 GB/s), but its copies cross the bus on the GPU's one queue, between the
/// kernels: an MSM streaming its bases hid none of its upload (2^25: 443.5 ms against 331.2
/// resident), where with wgpu's buffers the CPU's writes cross the bus beside the kernels and
/// the queue's copies stay in device memory. So wgpu's buffers are the default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StagingMemory {
    /// Host memory mapped once (Vulkan; elsewhere, or where the driver refuses, as
    /// [`StagingMemory::Wgpu`]): the GPU's copy reads it across the bus.
    Host,
    /// wgpu's `MAP_WRITE` buffers, device memory under resizable BAR: the CPU's writes cross
    /// the bus.
    Wgpu,
}

/// The staging buffers of one device, made on first use.
#[derive(Default)]
pub struct Staging {
    upload: Mutex<UploadSlots>,
    download: Mutex<Vec<Slot>>,
    /// Whether new upload slots are tried in host memory ([`StagingMemory::Host`]; cleared
    /// for good where the driver refuses).
    host_memory: std::sync::atomic::AtomicBool,
    /// Bytes uploaded through these buffers since the device opened.
    uploaded: std::sync::atomic::AtomicU64,
}

/// Upload slots not being written, most recently given back last, and how many exist (those
/// being written included) against `limit`.
struct UploadSlots {
    idle: Vec<Slot>,
    made: usize,
    limit: usize,
}

impl Default for UploadSlots {
    fn default() -> Self {
        UploadSlots {
            idle: Vec::new(),
            made: 0,
            limit: MAX_UPLOAD_SLOTS,
        }
    }
}

impl std::fmt::Debug for Staging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Staging")
    }
}

impl Slot {
    fn new(device: &wgpu::Device, size: u64, usage: wgpu::BufferUsages, mapped: bool) -> Self {
        Slot {
            buffer: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("staging"),
                size,
                usage,
                mapped_at_creation: mapped,
            }),
            host: None,
            pending: None,
        }
    }

    /// An upload slot: in host memory where `host` asks and the driver agrees, else wgpu's
    /// mapped buffer.
    fn upload(device: &wgpu::Device, size: u64, host: &std::sync::atomic::AtomicBool) -> Self {
        use std::sync::atomic::Ordering::Relaxed;
        if host.load(Relaxed) {
            match host_staging::upload_buffer(device, size) {
                Some((buffer, mapping)) => {
                    return Slot {
                        buffer,
                        host: Some(mapping),
                        pending: None,
                    }
                }
                None => host.store(false, Relaxed),
            }
        }
        let usage = wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC;
        Slot::new(device, size, usage, true)
    }

    /// Writes `bytes` at the start of the (free) slot and gives the buffer to the GPU.
    fn write(&self, bytes: &[u8]) -> Result<()> {
        let Some(host) = &self.host else {
            write_mapped(&self.buffer, bytes)?;
            self.buffer.unmap();
            return Ok(());
        };
        on_copy_threads(bytes.chunks(COPY_PIECE).enumerate(), |(i, piece)| {
            // SAFETY: the slot is free (its last copy has completed) and this upload holds it.
            unsafe { host.write(i * COPY_PIECE, piece) };
            Ok(())
        })
    }

    /// Marks the slot busy until `submission` (its copy) completes, and for buffers wgpu
    /// maps, asks for the map back after it.
    fn copied_in(&mut self, submission: wgpu::SubmissionIndex) {
        if self.host.is_some() {
            self.pending = Some((submission, None));
        } else {
            self.request_map(wgpu::MapMode::Write, submission);
        }
    }

    /// Whether the slot is mapped and free, without blocking.
    fn is_ready(&mut self, gpu: &super::GpuContext) -> Result<bool> {
        let Some((submission, receiver)) = &self.pending else {
            return Ok(true);
        };
        if !gpu.has_completed(submission.clone())? {
            return Ok(false);
        }
        let Some(receiver) = receiver else {
            self.pending = None;
            return Ok(true);
        };
        match receiver.try_recv() {
            Ok(mapped) => {
                mapped.map_err(|e| Error::device("mapping a staging buffer", e))?;
                self.pending = None;
                Ok(true)
            }
            Err(mpsc::TryRecvError::Empty) => Ok(false),
            Err(e) => Err(Error::device("staging map never completed", e)),
        }
    }

    /// Waits until the map requested after this slot's last copy has completed.
    fn wait_mapped(&mut self, gpu: &super::GpuContext) -> Result<()> {
        if let Some((submission, receiver)) = self.pending.take() {
            gpu.wait_for(submission)?;
            let Some(receiver) = receiver else {
                return Ok(());
            };
            receiver
                .recv()
                .map_err(|e| Error::device("staging map never completed", e))?
                .map_err(|e| Error::device("mapping a staging buffer", e))?;
        }
        Ok(())
    }

    fn request_map(&mut self, mode: wgpu::MapMode, submission: wgpu::SubmissionIndex) {
        let (sender, receiver) = mpsc::channel();
        self.buffer
            .slice(..)
            .map_async(mode, move |r| drop(sender.send(r)));
        self.pending = Some((submission, Some(receiver)));
    }
}

/// Bytes each thread copies at a time: one thread does not saturate copies into
/// write-combined (upload) or out of uncached (read-back) mappings.
const COPY_PIECE: usize = 1 << 20;
/// Threads of one copy, the caller's included.
const COPY_THREADS: usize = 8;

/// Runs `copy` on every item on up to [`COPY_THREADS`] threads.
///
/// Plain scoped threads, not rayon: copies run while a staging or workspace lock is held, and
/// a rayon thread waiting for its tasks runs other queued tasks meanwhile, among them another
/// worker's MSM or upload that wants the lock its own stack holds: a batch with two workers
/// deadlocked so. These threads run nothing but this copy.
fn on_copy_threads<T: Send>(
    items: impl ExactSizeIterator<Item = T> + Send,
    copy: impl Fn(T) -> Result<()> + Sync,
) -> Result<()> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(COPY_THREADS)
        .min(items.len());
    let items = Mutex::new(items);
    let run = || -> Result<()> {
        loop {
            let next = items.lock().unwrap_or_else(|e| e.into_inner()).next();
            match next {
                Some(item) => copy(item)?,
                None => return Ok(()),
            }
        }
    };
    if threads <= 1 {
        return run();
    }
    std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads).map(|_| scope.spawn(run)).collect();
        let mine = run();
        helpers
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .chain([mine])
            .collect()
    })
}

/// `dst.copy_from_slice(src)` on several threads.
fn parallel_copy(dst: &mut [u8], src: &[u8]) {
    let pieces = dst.chunks_mut(COPY_PIECE).zip(src.chunks(COPY_PIECE));
    let copied = on_copy_threads(pieces, |(d, s)| {
        d.copy_from_slice(s);
        Ok(())
    });
    debug_assert!(copied.is_ok(), "a plain copy cannot fail");
}

/// `bytes` into the start of the mapped `buffer`, on several threads (a view per piece:
/// wgpu's write views cannot be split).
fn write_mapped(buffer: &wgpu::Buffer, bytes: &[u8]) -> Result<()> {
    on_copy_threads(bytes.chunks(COPY_PIECE).enumerate(), |(i, piece)| {
        let at = (i * COPY_PIECE) as u64;
        buffer
            .slice(at..at + piece.len() as u64)
            .get_mapped_range_mut()
            .map_err(|e| Error::device("writing a staging buffer", e))?
            .copy_from_slice(piece);
        Ok(())
    })
}

fn chunk_size(gpu: &super::GpuContext) -> u64 {
    CHUNK.min(gpu.limits.max_buffer_size) & !(wgpu::COPY_BUFFER_ALIGNMENT - 1)
}

impl super::GpuContext {
    /// Bytes [`upload`](Self::upload) has copied to this device since it opened (host to
    /// device traffic, for benchmarks).
    pub fn uploaded_bytes(&self) -> u64 {
        self.staging
            .uploaded
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Copies `bytes` into `buffer` at `offset`. Later submissions see the data (one queue
    /// runs in order); this returns once the last chunk is handed to the GPU.
    pub fn upload(&self, buffer: &wgpu::Buffer, offset: u64, bytes: &[u8]) -> Result<()> {
        self.staging
            .uploaded
            .fetch_add(bytes.len() as u64, std::sync::atomic::Ordering::Relaxed);
        let chunk = chunk_size(self);
        for (i, piece) in bytes.chunks(chunk as usize).enumerate() {
            let mut slot = self.take_upload_slot(chunk)?;
            let copied = slot.write(piece).map(|()| {
                let mut encoder = self.device.create_command_encoder(&Default::default());
                let at = offset + i as u64 * chunk;
                encoder.copy_buffer_to_buffer(&slot.buffer, 0, buffer, at, piece.len() as u64);
                let submission = self.submit([encoder.finish()]);
                slot.copied_in(submission);
            });
            // A slot whose write failed is still mapped and free: it goes back either way.
            self.lock_upload_slots().idle.push(slot);
            copied?;
        }
        self.check_alive()
    }

    /// Where upload staging buffers are made from now on: the idle ones go, and later
    /// uploads make theirs in `memory` ([`StagingMemory::Wgpu`] by default; `bench transfer`
    /// compares the two).
    pub fn set_upload_staging(&self, memory: StagingMemory) {
        let mut slots = self.lock_upload_slots();
        // Slots being written come back in the old memory and serve as well.
        slots.made -= slots.idle.len();
        for slot in slots.idle.drain(..) {
            slot.buffer.destroy();
        }
        self.staging.host_memory.store(
            memory == StagingMemory::Host,
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// Where the upload staging buffers made next live: [`StagingMemory::Host`] once
    /// [`set_upload_staging`](Self::set_upload_staging) asked for it, until a driver refuses.
    pub fn upload_staging(&self) -> StagingMemory {
        if self
            .staging
            .host_memory
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            StagingMemory::Host
        } else {
            StagingMemory::Wgpu
        }
    }

    /// Bytes of one staging buffer.
    pub fn staging_buffer_bytes(&self) -> u64 {
        chunk_size(self)
    }

    /// Keeps the upload staging buffers within `bytes` (whole buffers, at least one, at
    /// most `MAX_UPLOAD_SLOTS`); idle buffers past the new limit are freed now. Uploads
    /// that find every buffer being written by another upload still make one more, so
    /// concurrent uploaders may pass the limit by a buffer each.
    pub fn limit_upload_staging(&self, bytes: u64) {
        let chunk = chunk_size(self);
        let limit = usize::try_from(bytes / chunk)
            .unwrap_or(usize::MAX)
            .clamp(1, MAX_UPLOAD_SLOTS);
        let mut slots = self.lock_upload_slots();
        slots.limit = limit;
        while slots.made > limit && !slots.idle.is_empty() {
            let slot = slots.idle.remove(0);
            slot.buffer.destroy();
            slots.made -= 1;
        }
    }

    fn lock_upload_slots(&self) -> std::sync::MutexGuard<'_, UploadSlots> {
        self.staging
            .upload
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// A mapped upload slot, taken out of the idle ones: the first free one, else a new one,
    /// else (at the cap) the oldest once its copy is done, waited for without the lock.
    fn take_upload_slot(&self, chunk: u64) -> Result<Slot> {
        let mut slots = self.lock_upload_slots();
        for i in 0..slots.idle.len() {
            if slots.idle[i].is_ready(self)? {
                return Ok(slots.idle.remove(i));
            }
        }
        // With none idle every slot is being written by another upload: one more, past the cap.
        if slots.made < slots.limit || slots.idle.is_empty() {
            slots.made += 1;
            drop(slots);
            let made = self.allocating("an upload staging buffer", chunk, || {
                Slot::upload(&self.device, chunk, &self.staging.host_memory)
            });
            if made.is_err() {
                self.lock_upload_slots().made -= 1;
            }
            return made;
        }
        let mut oldest = slots.idle.remove(0);
        drop(slots);
        match oldest.wait_mapped(self) {
            Ok(()) => Ok(oldest),
            Err(e) => {
                self.lock_upload_slots().made -= 1;
                Err(e)
            }
        }
    }

    /// The `len` bytes of `buffer` from `offset`, once the work submitted before has finished.
    pub fn download(&self, buffer: &wgpu::Buffer, offset: u64, len: u64) -> Result<Vec<u8>> {
        let mut out = vec![0u8; len as usize];
        self.download_into(buffer, offset, &mut out)?;
        Ok(out)
    }

    /// Fills `out` with the bytes of `buffer` from `offset`, once the work submitted before
    /// has finished.
    pub fn download_into(&self, buffer: &wgpu::Buffer, offset: u64, out: &mut [u8]) -> Result<()> {
        let len = out.len() as u64;
        let chunk = chunk_size(self);
        let mut slots = self
            .staging
            .download
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if slots.is_empty() {
            let usage = wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST;
            let made =
                self.allocating("read-back staging buffers", chunk * SLOTS as u64, || {
                    (0..SLOTS)
                        .map(|_| Slot::new(&self.device, chunk, usage, false))
                        .collect::<Vec<_>>()
                })?;
            *slots = made;
        }
        let pieces = len.div_ceil(chunk) as usize;
        let piece_len = |i: usize| chunk.min(len - i as u64 * chunk);
        let start_copy = |slot: &mut Slot, i: usize| {
            let mut encoder = self.device.create_command_encoder(&Default::default());
            encoder.copy_buffer_to_buffer(
                buffer,
                offset + i as u64 * chunk,
                &slot.buffer,
                0,
                piece_len(i),
            );
            let submission = self.submit([encoder.finish()]);
            slot.request_map(wgpu::MapMode::Read, submission);
        };
        for (i, slot) in slots.iter_mut().enumerate().take(pieces) {
            start_copy(slot, i);
        }
        for i in 0..pieces {
            let slot = &mut slots[i % SLOTS];
            slot.wait_mapped(self)?;
            let at = (i as u64 * chunk) as usize;
            parallel_copy(
                &mut out[at..at + piece_len(i) as usize],
                &slot
                    .buffer
                    .slice(..piece_len(i))
                    .get_mapped_range()
                    .map_err(|e| Error::device("reading a staging buffer", e))?,
            );
            slot.buffer.unmap();
            if i + SLOTS < pieces {
                start_copy(slot, i + SLOTS);
            }
        }
        self.check_alive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::{AdapterSelector, GpuContext};
    use std::time::Duration;

    /// Both staging memories carry every byte to its place, with one staging buffer allowed:
    /// each chunk past the first waits for the copy before it to reuse the buffer.
    #[test]
    fn uploads_through_either_staging_memory_arrive_whole() {
        let gpu = match GpuContext::new(&AdapterSelector::default()) {
            Ok(gpu) => gpu,
            Err(e) if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") => {
                panic!("CI=true and no adapter: {e}")
            }
            Err(e) => return eprintln!("skipping: no adapter ({e})"),
        };
        let chunk = chunk_size(&gpu) as usize;
        let offset = 4096u64;
        let bytes: Vec<u8> = (0..chunk * 5 / 2)
            .map(|i| (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes()[7])
            .collect();
        let buffer = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("staging test"),
            size: offset + bytes.len() as u64,
            usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        gpu.limit_upload_staging(chunk as u64);
        for memory in [StagingMemory::Host, StagingMemory::Wgpu] {
            gpu.set_upload_staging(memory);
            gpu.upload(&buffer, offset, &bytes).unwrap();
            if gpu.adapter.get_info().backend == wgpu::Backend::Vulkan {
                assert_eq!(
                    gpu.upload_staging(),
                    memory,
                    "the driver refused {memory:?}"
                );
            }
            let back = gpu.download(&buffer, offset, bytes.len() as u64).unwrap();
            assert!(back == bytes, "{memory:?}: the bytes came back changed");
            gpu.upload(&buffer, offset, &vec![0; bytes.len()]).unwrap();
        }
    }

    /// While one upload has a slot out (a chunk being written: a proof's 4 GB of staging keep
    /// a worker writing for hundreds of milliseconds), another thread's upload goes ahead.
    /// Held across whole uploads, the slots' lock made the prover's compute worker upload its
    /// gather's coefficients only after the other worker's staging, the GPU idle meanwhile
    /// (docs/benchmarks/gpu-part-2-27.md, commit 2c7e742).
    #[test]
    fn an_upload_goes_ahead_while_another_writes_a_slot() {
        let gpu = match GpuContext::new(&AdapterSelector::default()) {
            Ok(gpu) => &*Box::leak(Box::new(gpu)),
            Err(e) if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") => {
                panic!("CI=true and no adapter: {e}")
            }
            Err(e) => return eprintln!("skipping: no adapter ({e})"),
        };
        let writing = gpu.take_upload_slot(chunk_size(gpu)).unwrap();
        let bytes: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
        let (sent, received) = mpsc::channel();
        let expected = bytes.clone();
        std::thread::spawn(move || {
            let back = gpu
                .storage_buffer("upload test", &bytes)
                .and_then(|buffer| gpu.read_buffer(&buffer));
            let _ = sent.send(back);
        });
        let back = received
            .recv_timeout(Duration::from_secs(120))
            .expect("an upload waited for a slot another upload was writing");
        assert!(
            back.unwrap() == expected,
            "the upload's bytes came back changed"
        );
        gpu.lock_upload_slots().idle.push(writing);
    }
}
