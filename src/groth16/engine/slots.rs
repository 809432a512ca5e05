//! Proofs in flight on one device, across every prover and batch that share it: the plan
//! sized the budget for so many proofs' buffers, and one more would wait on the pool for
//! buffers another proof holds to its end (or fail), so a proof waits here for a slot before
//! it takes any.

use std::sync::{Condvar, Mutex, MutexGuard};

/// At most `capacity` holders at once.
#[derive(Debug)]
pub struct ProofSlots {
    state: Mutex<Slots>,
    freed: Condvar,
}

#[derive(Debug)]
struct Slots {
    in_use: usize,
    capacity: usize,
}

/// A slot, given back on drop.
pub struct ProofSlot<'a> {
    slots: &'a ProofSlots,
}

impl ProofSlots {
    /// No limit until a plan sets one.
    pub fn new() -> Self {
        ProofSlots {
            state: Mutex::new(Slots {
                in_use: 0,
                capacity: usize::MAX,
            }),
            freed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slots> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Allows `capacity` proofs at once (at least one) from now on.
    pub fn set_capacity(&self, capacity: usize) {
        self.lock().capacity = capacity.max(1);
        self.freed.notify_all();
    }

    /// Allows at most `capacity` proofs at once (at least one): the fewest any plan made
    /// on the device allows, as every parameter set's proofs share its memory.
    pub fn limit(&self, capacity: usize) {
        let mut state = self.lock();
        state.capacity = state.capacity.min(capacity.max(1));
    }

    /// A slot, waiting while every slot is held.
    pub fn take(&self) -> ProofSlot<'_> {
        let mut state = self.lock();
        while state.in_use >= state.capacity {
            state = self.freed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.in_use += 1;
        ProofSlot { slots: self }
    }
}

impl Default for ProofSlots {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for ProofSlot<'_> {
    fn drop(&mut self) {
        self.slots.lock().in_use -= 1;
        self.slots.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn no_more_than_the_capacity_hold_slots_at_once() {
        let slots = ProofSlots::new();
        slots.set_capacity(2);
        let (held, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    let _slot = slots.take();
                    let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    held.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        assert_eq!(most.load(Ordering::SeqCst), 2);
    }
}
