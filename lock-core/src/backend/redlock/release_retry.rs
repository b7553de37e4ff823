//! Releases sent again in the background to the masters that missed them.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::{MAX_RELEASES_LATER, RedLockBackend};
use crate::backend::release_until;
use crate::backend::stored_keys::StoredKeys;
use crate::kind::LockKind;

impl RedLockBackend {
    /// After a release that stands (whose owner value is never used
    /// again): sends it again in the background to the masters that
    /// `failed` to answer, until each answers or the longest lease asked
    /// for would have ended. A master cut off when the release was sent
    /// would otherwise keep the lease, and with it a vote, for its whole
    /// ttl once it is back. At most [`MAX_RELEASES_LATER`] wait at once;
    /// beyond, the lease is left to its expiry.
    pub(super) fn release_later(
        &self,
        failed: &[bool],
        keys: &StoredKeys,
        kind: LockKind,
        owner: &str,
    ) {
        let longest = Duration::from_millis(self.longest_ttl.load(Ordering::Relaxed));
        let runs_out = Instant::now() + longest;
        for (master, &failed) in self.masters.iter().zip(failed) {
            // A master never connected holds no lease of this client.
            if !failed || master.backend.get().is_none() {
                continue;
            }
            let Some(pending) = Pending::take(&self.releases_later) else {
                continue;
            };
            let (master, keys, owner) = (Arc::clone(master), keys.clone(), owner.to_owned());
            tokio::spawn(async move {
                let _pending = pending;
                if let Some(backend) = master.backend.get() {
                    release_until(backend, &keys, kind, &owner, runs_out).await;
                }
            });
        }
    }

    /// Notes a lease of `ttl` asked for (see [`release_later`](Self::release_later)).
    pub(super) fn asked_for(&self, ttl: Duration) {
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        self.longest_ttl.fetch_max(ms, Ordering::Relaxed);
    }
}

/// One of the [`MAX_RELEASES_LATER`] places, given back when dropped (also
/// with a task that never ran, its runtime gone).
struct Pending(Arc<AtomicUsize>);

impl Pending {
    fn take(count: &Arc<AtomicUsize>) -> Option<Self> {
        if count.fetch_add(1, Ordering::Relaxed) >= MAX_RELEASES_LATER {
            count.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(Pending(Arc::clone(count)))
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
