//! Proofs in flight on one device, across every prover and batch that share it: the plan
//! sized the budget for so many proofs' buffers, and one more would wait on the pool for
//! buffers another proof holds to its end (or fail), so a proof waits here for a slot before
//! it takes any.
//!
//! One proof more may stage ahead: a proof past its H step holds less than its slot allows
//! and opens the rest ([`ProofSlot::open`]); the next proof whose staging fits there takes
//! a slot ahead, stages (its uploads beside the other's MSMs), and waits for a whole slot
//! ([`ProofSlot::whole`]) before its compute stage takes anything more. Without it a plan of
//! one proof in flight left the GPU idle while each proof staged (a 32 GiB C2 on an H100:
//! 5.1-5.6 s of ten proofs, docs/benchmarks/filecoin-c2.md).

use std::cell::Cell;
use std::sync::{Condvar, Mutex, MutexGuard};

/// At most `capacity` whole slots held at once, and one slot ahead where room is open.
#[derive(Debug)]
pub struct ProofSlots {
    state: Mutex<Slots>,
    changed: Condvar,
}

#[derive(Debug)]
struct Slots {
    /// Whole slots held.
    in_use: usize,
    capacity: usize,
    /// Bytes that holders past their H step opened for a proof staging ahead.
    open: u64,
    /// Whether a proof holds the slot ahead (at most one does).
    ahead: bool,
    /// Proofs that took the slot ahead so far.
    taken_ahead: usize,
}

/// A slot, given back on drop: whole, or ahead until [`whole`](Self::whole).
pub struct ProofSlot<'a> {
    slots: &'a ProofSlots,
    held: Cell<Held>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    /// A whole slot, with the bytes its proof opened for one staging ahead.
    Whole {
        opened: u64,
    },
    Ahead,
}

impl ProofSlots {
    /// No limit until a plan sets one.
    pub fn new() -> Self {
        ProofSlots {
            state: Mutex::new(Slots {
                in_use: 0,
                capacity: usize::MAX,
                open: 0,
                ahead: false,
                taken_ahead: 0,
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slots> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, state: MutexGuard<'a, Slots>) -> MutexGuard<'a, Slots> {
        self.changed.wait(state).unwrap_or_else(|e| e.into_inner())
    }

    /// Allows `capacity` proofs at once (at least one) from now on.
    pub fn set_capacity(&self, capacity: usize) {
        self.lock().capacity = capacity.max(1);
        self.changed.notify_all();
    }

    /// Allows at most `capacity` proofs at once (at least one): the fewest any plan made
    /// on the device allows, as every parameter set's proofs share its memory.
    pub fn limit(&self, capacity: usize) {
        let mut state = self.lock();
        state.capacity = state.capacity.min(capacity.max(1));
    }

    /// A slot for a proof whose staging takes `staged_bytes` of device memory: a whole one,
    /// or where every whole slot is held, the slot ahead once a holder opened room for
    /// that staging (none is open for a staging of nothing: it gains nothing ahead).
    /// The slot ahead comes first to the next whole slot.
    pub fn take(&self, staged_bytes: u64) -> ProofSlot<'_> {
        let mut state = self.lock();
        let held = loop {
            if state.in_use + usize::from(state.ahead) < state.capacity {
                state.in_use += 1;
                break Held::Whole { opened: 0 };
            }
            if !state.ahead && staged_bytes > 0 && staged_bytes <= state.open {
                state.ahead = true;
                state.taken_ahead += 1;
                break Held::Ahead;
            }
            state = self.wait(state);
        };
        ProofSlot {
            slots: self,
            held: Cell::new(held),
        }
    }

    /// Proofs that took the slot ahead since this device's engine was made.
    pub fn taken_ahead(&self) -> usize {
        self.lock().taken_ahead
    }
}

impl Default for ProofSlots {
    fn default() -> Self {
        Self::new()
    }
}

impl ProofSlot<'_> {
    /// Makes a slot ahead whole, waiting for a whole slot to be given back (at once for a
    /// whole slot).
    pub fn whole(&self) {
        if self.held.get() != Held::Ahead {
            return;
        }
        let slots = self.slots;
        let mut state = slots.lock();
        while state.in_use >= state.capacity {
            state = slots.wait(state);
        }
        state.in_use += 1;
        state.ahead = false;
        self.held.set(Held::Whole { opened: 0 });
        drop(state);
        slots.changed.notify_all();
    }

    /// Opens `bytes` of a whole slot's room, which its proof no longer needs, to a proof
    /// staging ahead (until this slot is given back).
    pub fn open(&self, bytes: u64) {
        let Held::Whole { opened } = self.held.get() else {
            return;
        };
        let mut state = self.slots.lock();
        state.open = state.open - opened + bytes;
        self.held.set(Held::Whole { opened: bytes });
        drop(state);
        self.slots.changed.notify_all();
    }
}

impl Drop for ProofSlot<'_> {
    fn drop(&mut self) {
        let mut state = self.slots.lock();
        match self.held.get() {
            Held::Whole { opened } => {
                state.in_use -= 1;
                state.open -= opened;
            }
            // Its proof failed before it computed.
            Held::Ahead => state.ahead = false,
        }
        drop(state);
        self.slots.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[test]
    fn no_more_than_the_capacity_hold_slots_at_once() {
        let slots = ProofSlots::new();
        slots.set_capacity(2);
        let (held, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    let _slot = slots.take(1);
                    let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(5));
                    held.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        assert_eq!(most.load(Ordering::SeqCst), 2);
        assert_eq!(slots.taken_ahead(), 0, "no room was opened");
    }

    /// With one whole slot: a proof stages ahead only into room opened for at least its
    /// staging, one at a time, and computes only once the holder gave its slot back; the
    /// proof ahead gets that slot before a newcomer.
    #[test]
    fn one_proof_stages_ahead_into_opened_room_and_computes_after_the_holder() {
        let slots = ProofSlots::new();
        slots.set_capacity(1);
        let order = Mutex::new(Vec::new());
        let log = |what: &str| order.lock().unwrap().push(what.to_string());
        let first = slots.take(4);
        std::thread::scope(|scope| {
            let ahead = scope.spawn(|| {
                let slot = slots.take(4);
                log("staged ahead");
                slot.whole();
                log("second computes");
            });
            std::thread::sleep(Duration::from_millis(20));
            assert_eq!(slots.taken_ahead(), 0, "no room open yet");
            first.open(3);
            std::thread::sleep(Duration::from_millis(20));
            assert_eq!(slots.taken_ahead(), 0, "3 bytes open, 4 staged");
            first.open(4);
            while slots.taken_ahead() == 0 {
                std::thread::yield_now();
            }
            // A third proof waits: one slot ahead at most, and none whole is free.
            let third = scope.spawn(|| {
                let _slot = slots.take(4);
                log("third");
            });
            std::thread::sleep(Duration::from_millis(20));
            log("first ends");
            drop(first);
            ahead.join().unwrap();
            third.join().unwrap();
        });
        let order = order.into_inner().unwrap();
        assert_eq!(
            order[..3],
            ["staged ahead", "first ends", "second computes"]
        );
        assert_eq!(order[3], "third");
        assert_eq!(slots.taken_ahead(), 1);
        let state = slots.lock();
        assert_eq!((state.in_use, state.open, state.ahead), (0, 0, false));
    }
}
