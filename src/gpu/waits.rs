//! The stage each blocking wait happens in. A proof's staging stage must never block on the
//! GPU (supraseal-c2's lesson, ../shared/DESIGN.md §6: one wait there and the two locks act
//! as one); stages mark their threads here, and a test records every wait's stage during a
//! batch and finds none in staging.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

thread_local! {
    static STAGE: Cell<Option<&'static str>> = const { Cell::new(None) };
}
static RECORDING: AtomicBool = AtomicBool::new(false);
static RECORDED: Mutex<Vec<Option<&'static str>>> = Mutex::new(Vec::new());

/// This thread is inside a stage until the guard drops.
pub struct StageGuard {
    previous: Option<&'static str>,
    /// The mark belongs to this thread.
    _not_send: PhantomData<*const ()>,
}

impl Drop for StageGuard {
    fn drop(&mut self) {
        STAGE.with(|s| s.set(self.previous));
    }
}

/// Marks this thread as inside `stage` (e.g. "staging", "compute").
pub fn enter(stage: &'static str) -> StageGuard {
    StageGuard {
        previous: STAGE.with(|s| s.replace(Some(stage))),
        _not_send: PhantomData,
    }
}

/// From now on, every blocking wait in this process is recorded with its thread's stage.
pub fn start_recording() {
    RECORDING.store(true, Ordering::Relaxed);
}

/// The stages of the waits recorded so far (`None`: outside any stage), clearing them.
pub fn take_recorded() -> Vec<Option<&'static str>> {
    std::mem::take(&mut *RECORDED.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Called by every blocking wait.
pub(super) fn record() {
    if RECORDING.load(Ordering::Relaxed) {
        let stage = STAGE.with(|s| s.get());
        RECORDED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(stage);
    }
}
