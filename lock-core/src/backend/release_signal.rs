//! [`ReleaseSignal`]: how a waiter hears that the lock it waits for was
//! released.

use tokio::sync::watch;

/// A subscription to the releases of one lock.
///
/// Created before a waiter retries, so a release that happens between the
/// retry and the wait is not missed: every release bumps a counter, and
/// [`ReleaseSignal::released`] returns once it moved since the last call.
pub struct ReleaseSignal {
    releases: watch::Receiver<u64>,
    _registration: Box<dyn Send + Sync>,
}

impl std::fmt::Debug for ReleaseSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReleaseSignal")
            .field("releases", &*self.releases.borrow())
            .finish_non_exhaustive()
    }
}

impl ReleaseSignal {
    /// A signal fed by `releases`; `registration` is dropped with the signal
    /// (for example to unsubscribe).
    pub fn new(releases: watch::Receiver<u64>, registration: impl Send + Sync + 'static) -> Self {
        ReleaseSignal {
            releases,
            _registration: Box::new(registration),
        }
    }

    /// Waits for the next release. Returns `false` if the source is gone
    /// (the subscription connection closed); the caller then falls back on
    /// the lease's remaining time.
    ///
    /// # Cancel safety
    /// Cancel safe: a release seen by a cancelled call is reported by the
    /// next one.
    pub async fn released(&mut self) -> bool {
        self.releases.changed().await.is_ok()
    }
}
