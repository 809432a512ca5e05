//! Between a batch's synthesis and its workers: the slots that bound how many synthesized
//! circuits the host holds, and the queue that hands them over.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::error::Error;
use crate::groth16::synthesis::ProvingAssignment;

/// Synthesized circuits waiting for a worker, in the order they were handed over, and the
/// batch's first error.
pub(super) struct Queue {
    state: Mutex<QueueState>,
    changed: Condvar,
}

#[derive(Default)]
pub(super) struct QueueState {
    ready: VecDeque<(usize, Synthesized)>,
    /// No more circuits will come (all handed over, or the batch failed).
    closed: bool,
    pub(super) error: Option<Error>,
}

impl Queue {
    pub(super) fn new() -> Self {
        Queue {
            state: Mutex::default(),
            changed: Condvar::new(),
        }
    }

    pub(super) fn push(&self, item: (usize, Synthesized)) {
        self.lock().ready.push_back(item);
        self.changed.notify_one();
    }

    /// The next circuit, waiting for one; `None` once the queue is closed and empty or the
    /// batch failed.
    pub(super) fn pop(&self) -> Option<(usize, Synthesized)> {
        let mut state = self.lock();
        loop {
            if state.error.is_some() {
                return None;
            }
            if let Some(item) = state.ready.pop_front() {
                return Some(item);
            }
            if state.closed {
                return None;
            }
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    pub(super) fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }

    /// Records the batch's first error and stops every worker.
    pub(super) fn fail(&self, error: Error) {
        let mut state = self.lock();
        state.error.get_or_insert(error);
        state.closed = true;
        drop(state);
        self.changed.notify_all();
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A synthesized circuit and its slot of the host budget, given back once the assignment's
/// memory is.
pub(super) struct Synthesized {
    pub(super) assignment: ProvingAssignment,
    /// Declared after `assignment`, so dropped after it.
    pub(super) _slot: Slot,
}

/// Room in the host budget for synthesized circuits, counted in circuits. Synthesis takes a
/// slot before it starts a circuit; the slot comes back when the circuit's assignment is
/// dropped (after its proof, or when the batch fails).
///
/// Slots go to circuits in index order, the slot and the index taken together: no later
/// circuit holds a slot while an earlier one waits for one. Circuit 0 thus always has one,
/// and the slots are held by circuits being synthesized, waiting for circuit 0 to be handed
/// over, or proving, each of which finishes without a further slot: the hand-over always
/// gets circuit 0 and then every other.
pub(super) struct Slots {
    state: Mutex<SlotState>,
    changed: Condvar,
}

pub(super) struct SlotState {
    /// Slots in all: one while circuit 0's size is unknown.
    limit: usize,
    held: usize,
    /// The most held at once.
    peak: usize,
    /// The next circuit to synthesize, and how many there are.
    next: usize,
    count: usize,
    /// No more circuits are taken: the batch failed, or a circuit's synthesis did.
    stopped: bool,
}

impl Slots {
    pub(super) fn new(limit: usize, count: usize) -> Arc<Self> {
        Arc::new(Slots {
            state: Mutex::new(SlotState {
                limit,
                held: 0,
                peak: 0,
                next: 0,
                count,
                stopped: false,
            }),
            changed: Condvar::new(),
        })
    }

    /// The next circuit to synthesize and its slot, waiting for a free slot; `None` once
    /// every circuit is taken or the slots are stopped.
    pub(super) fn claim(self: &Arc<Self>) -> Option<(usize, Slot)> {
        let mut state = self.lock();
        loop {
            if state.stopped || state.next >= state.count {
                return None;
            }
            if state.held < state.limit {
                break;
            }
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        let i = state.next;
        state.next += 1;
        state.held += 1;
        state.peak = state.peak.max(state.held);
        if state.next == state.count {
            // Waiters find nothing left to take.
            self.changed.notify_all();
        }
        Some((i, Slot(self.clone())))
    }

    pub(super) fn set_limit(&self, limit: usize) {
        self.lock().limit = limit;
        self.changed.notify_all();
    }

    /// Takes no more circuits, and wakes those waiting for a slot.
    pub(super) fn stop(&self) {
        self.lock().stopped = true;
        self.changed.notify_all();
    }

    pub(super) fn peak(&self) -> usize {
        self.lock().peak
    }

    fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One circuit's slot of the host budget, given back when dropped.
pub(super) struct Slot(Arc<Slots>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.lock().held -= 1;
        self.0.changed.notify_all();
    }
}
