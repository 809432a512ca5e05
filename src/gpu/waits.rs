//! The stage each blocking wait happens in. A proof's staging stage must never block on the
//! GPU (supraseal-c2's lesson, docs/design.md, "The two-stage pipeline and the two locks":
//! one wait there and the two locks act as one); stages mark their threads here, and a test records every wait's stage during a
//! batch and finds none in staging.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// The two stages of a proof on a device, each under its own lock (supraseal-c2's two locks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Uploads into pooled buffers, while another proof may compute: never waits on the GPU.
    Staging,
    /// The kernels of one proof and their results.
    Compute,
}

thread_local! {
    static STAGE: Cell<Option<Stage>> = const { Cell::new(None) };
}
static RECORDING: AtomicBool = AtomicBool::new(false);
static RECORDED: Mutex<Vec<Option<Stage>>> = Mutex::new(Vec::new());

/// This thread is inside a stage until the mark drops.
pub struct StageMark {
    previous: Option<Stage>,
    /// The mark belongs to this thread.
    _not_send: PhantomData<*const ()>,
}

impl Drop for StageMark {
    fn drop(&mut self) {
        STAGE.with(|s| s.set(self.previous));
    }
}

/// Marks this thread as inside `stage`.
pub fn enter(stage: Stage) -> StageMark {
    StageMark {
        previous: STAGE.with(|s| s.replace(Some(stage))),
        _not_send: PhantomData,
    }
}

/// From now on, every blocking wait in this process is recorded with its thread's stage.
pub fn start_recording() {
    RECORDING.store(true, Ordering::Relaxed);
}

/// The stages of the waits recorded so far (`None`: outside any stage), clearing them.
pub fn take_recorded() -> Vec<Option<Stage>> {
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
