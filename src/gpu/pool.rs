//! Device buffers reused across proofs within a VRAM budget.
//!
//! A buffer handed back goes into the pool only once the submission that last used it has
//! completed (its `SubmissionIndex` is the fence), never merely because a handle was dropped.
//! When the budget is used up, [`BufferPool::take`] waits for the oldest buffer still in
//! flight, on that buffer's own fence: never on the whole device, which would also wait for
//! other workers' kernels (supraseal-c2's two-locks lesson: docs/design.md, "The two-stage
//! pipeline and the two locks").

use std::sync::{Arc, Mutex};

use super::GpuContext;
use crate::error::{Error, Result};

/// Buffers of one device. Cloning shares the pool.
#[derive(Clone)]
pub struct BufferPool {
    inner: Arc<Mutex<PoolState>>,
    gpu: GpuContext,
}

struct PoolState {
    budget: u64,
    /// Bytes of every buffer the pool owns (free, in flight, or taken).
    allocated: u64,
    /// The most `allocated` has been.
    peak: u64,
    free: Vec<wgpu::Buffer>,
    /// Handed back, waiting for their last submission.
    in_flight: Vec<(wgpu::Buffer, wgpu::SubmissionIndex)>,
}

/// Bytes counted against a pool's budget for memory it does not own; released on drop.
pub struct Reservation {
    pool: BufferPool,
    bytes: u64,
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Reservation({} bytes)", self.bytes)
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut state = self.pool.lock();
        state.allocated = state.allocated.saturating_sub(self.bytes);
    }
}

/// What the pool holds, for tests and logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolStats {
    pub allocated_bytes: u64,
    /// The most bytes counted at once since the pool was made or its peak was reset.
    pub peak_bytes: u64,
    pub free: usize,
    pub in_flight: usize,
}

impl std::fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferPool")
            .field("budget", &self.budget())
            .field("stats", &self.stats())
            .finish()
    }
}

impl BufferPool {
    /// A pool that never owns more than `budget` bytes of buffers.
    pub fn new(gpu: &GpuContext, budget: u64) -> Self {
        BufferPool {
            inner: Arc::new(Mutex::new(PoolState {
                budget,
                allocated: 0,
                peak: 0,
                free: Vec::new(),
                in_flight: Vec::new(),
            })),
            gpu: gpu.clone(),
        }
    }

    pub fn budget(&self) -> u64 {
        self.lock().budget
    }

    /// Sets the budget to `bytes`. Free buffers (finished ones included) are dropped now:
    /// kept, they stayed allocated past a lower budget (at 12 GiB after a 16 GiB batch on
    /// the H200, 13,430 MiB counted and 17,507 MiB in use). What is held stays until given
    /// back.
    pub fn set_budget(&self, bytes: u64) {
        let mut state = self.lock();
        let _ = self.collect_finished(&mut state);
        for buffer in std::mem::take(&mut state.free) {
            state.allocated -= buffer.size();
            buffer.destroy();
        }
        state.budget = bytes;
    }

    /// When the driver refused memory the budget allowed: drops the free buffers and lowers
    /// the budget to three quarters of the most the pool has held (the device gave about
    /// that much), never below what stays held. Returns the new budget.
    pub fn release_free(&self) -> u64 {
        let mut state = self.lock();
        for buffer in std::mem::take(&mut state.free) {
            state.allocated -= buffer.size();
            buffer.destroy();
        }
        state.budget = state.budget.min((state.peak / 4 * 3).max(state.allocated));
        state.budget
    }

    /// Starts counting [`PoolStats::peak_bytes`] again from what is held now.
    pub fn reset_peak(&self) {
        let mut state = self.lock();
        state.peak = state.allocated;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn stats(&self) -> PoolStats {
        let state = self.lock();
        PoolStats {
            allocated_bytes: state.allocated,
            peak_bytes: state.peak,
            free: state.free.len(),
            in_flight: state.in_flight.len(),
        }
    }

    /// A storage buffer of `size` bytes (contents undefined): a free one of that size, else a
    /// new one if the budget allows (dropping free buffers of other sizes to make room), else
    /// the first in-flight buffer of that size once its fence has passed.
    pub fn take(&self, what: &str, size: u64) -> Result<wgpu::Buffer> {
        self.within_budget(what, size, |state| {
            if let Some(i) = state.free.iter().position(|b| b.size() == size) {
                return Ok(Some(state.free.swap_remove(i)));
            }
            if !make_room(state, size) {
                return Ok(None);
            }
            let buffer = self
                .gpu
                .allocating(what, size, || self.gpu.empty_storage_buffer(what, size))??;
            state.grow(size);
            Ok(Some(buffer))
        })
    }

    /// Counts `bytes` the caller allocates itself (an MSM workspace) against the budget,
    /// waiting for buffers in flight as [`take`](Self::take) does, until the reservation
    /// drops.
    pub fn reserve(&self, what: &str, bytes: u64) -> Result<Reservation> {
        self.within_budget(what, bytes, |state| {
            if !make_room(state, bytes) {
                return Ok(None);
            }
            state.grow(bytes);
            Ok(Some(Reservation {
                pool: self.clone(),
                bytes,
            }))
        })
    }

    /// Runs `attempt` on the pool's state (finished buffers collected first) until it
    /// succeeds, waiting for the oldest buffer in flight between tries.
    fn within_budget<T>(
        &self,
        what: &str,
        bytes: u64,
        mut attempt: impl FnMut(&mut PoolState) -> Result<Option<T>>,
    ) -> Result<T> {
        let budget = self.budget();
        if bytes > budget {
            return Err(Error::VramBudget {
                what: what.to_string(),
                needed: bytes,
                budget,
            });
        }
        loop {
            let mut state = self.lock();
            self.collect_finished(&mut state)?;
            if let Some(done) = attempt(&mut state)? {
                return Ok(done);
            }
            self.wait_for_oldest(state, what, bytes)?;
        }
    }

    /// Over budget with nothing free: waits for the oldest buffer in flight (on its own
    /// fence), or fails when none is in flight (the rest is taken).
    fn wait_for_oldest(
        &self,
        state: std::sync::MutexGuard<'_, PoolState>,
        what: &str,
        bytes: u64,
    ) -> Result<()> {
        let Some(oldest) = state.in_flight.first().map(|(_, fence)| fence.clone()) else {
            return Err(Error::VramBudget {
                what: what.to_string(),
                needed: state.allocated + bytes,
                budget: state.budget,
            });
        };
        drop(state);
        self.gpu.wait_for(oldest)
    }

    /// Counts `bytes` held outside the pool (resident bases) against the budget if they fit
    /// beside what the pool owns now (after dropping free buffers; no waiting), until the
    /// reservation drops; `None` if they do not fit.
    pub fn set_aside(&self, bytes: u64) -> Option<Reservation> {
        let mut state = self.lock();
        // Buffers whose last submission completed are free: their room counts.
        let _ = self.collect_finished(&mut state);
        if !make_room(&mut state, bytes) {
            return None;
        }
        state.grow(bytes);
        Some(Reservation {
            pool: self.clone(),
            bytes,
        })
    }

    /// Bytes of the budget that buffers and reservations do not hold now, counting free
    /// buffers as room.
    pub fn room(&self) -> u64 {
        let mut state = self.lock();
        let _ = self.collect_finished(&mut state);
        let free: u64 = state.free.iter().map(wgpu::Buffer::size).sum();
        state.budget.saturating_sub(state.allocated - free)
    }

    /// Gives `buffer` back; it becomes free once `last_use` (the last submission that used
    /// it; `None` if none did) has completed.
    pub fn give_back(&self, buffer: wgpu::Buffer, last_use: Option<wgpu::SubmissionIndex>) {
        let mut state = self.lock();
        match last_use {
            Some(fence) => state.in_flight.push((buffer, fence)),
            None => state.free.push(buffer),
        }
    }

    /// Moves the in-flight buffers whose fence has passed to the free list, checking each
    /// fence without blocking.
    fn collect_finished(&self, state: &mut PoolState) -> Result<()> {
        let mut i = 0;
        while i < state.in_flight.len() {
            if self.gpu.has_completed(state.in_flight[i].1.clone())? {
                let (buffer, _) = state.in_flight.swap_remove(i);
                state.free.push(buffer);
            } else {
                i += 1;
            }
        }
        Ok(())
    }
}

impl PoolState {
    fn grow(&mut self, bytes: u64) {
        self.allocated += bytes;
        self.peak = self.peak.max(self.allocated);
    }
}

/// Drops free buffers until `bytes` more fit the budget; whether they do.
fn make_room(state: &mut PoolState, bytes: u64) -> bool {
    while state.allocated + bytes > state.budget {
        match state.free.pop() {
            Some(other) => {
                state.allocated -= other.size();
                other.destroy();
            }
            None => return false,
        }
    }
    true
}
