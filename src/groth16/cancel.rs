//! Stopping a batch that is running: whoever started it (a daemon whose job was cancelled)
//! keeps a [`CancelToken`], and the batch pipeline checks it between its circuits.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::{Error, Result};

/// A request to stop, shared by clones: once [`cancel`](Self::cancel)led, a batch holding
/// the token ends with [`Error::Cancelled`] at its next check (before it synthesizes a
/// circuit, and before each proof's GPU stages); a step already started runs to its end.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A token not cancelled (yet).
    pub fn new() -> Self {
        Self::default()
    }

    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// [`Error::Cancelled`] once cancelled.
    pub fn check(&self) -> Result<()> {
        if self.is_cancelled() {
            return Err(Error::Cancelled);
        }
        Ok(())
    }
}
