//! Releases sent again in the background to the masters that missed them.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::{MAX_RELEASES_LATER, RedLockBackend};
use crate::backend::Claim;
use crate::keys::StoredKeys;
use crate::retry::release_until;
use crate::store_error::StoreError;

impl RedLockBackend {
    /// After a release (whose owner value is never used again): sends it
    /// again in the background to the masters whose answer in `answers`
    /// was a transient failure, until each answers or the longest lease
    /// asked for would have ended. A master cut off when the release was
    /// sent would otherwise keep the lease, and with it a vote, for its
    /// whole ttl once it is back. At most [`MAX_RELEASES_LATER`] wait at
    /// once; beyond, the lease is left to its expiry.
    pub(super) fn release_later<T>(
        &self,
        answers: &[Result<T, StoreError>],
        keys: &StoredKeys,
        claim: Claim,
        owner: &str,
    ) {
        let longest = Duration::from_millis(self.longest_ttl.load(Ordering::Relaxed));
        let runs_out = Instant::now() + longest;
        for (master, answer) in self.masters.iter().zip(answers) {
            let failed = matches!(answer, Err(err) if err.is_transient());
            // A master never connected holds no lease of this client.
            if !failed || master.backend.get().is_none() {
                continue;
            }
            if self.releases_later.fetch_add(1, Ordering::Relaxed) >= MAX_RELEASES_LATER {
                self.releases_later.fetch_sub(1, Ordering::Relaxed);
                continue;
            }
            let pending = Arc::clone(&self.releases_later);
            let (master, keys, owner) = (Arc::clone(master), keys.clone(), owner.to_owned());
            tokio::spawn(async move {
                if let Some(backend) = master.backend.get() {
                    release_until(backend, &keys, claim, &owner, runs_out).await;
                }
                pending.fetch_sub(1, Ordering::Relaxed);
            });
        }
    }

    /// Notes a lease of `ttl` asked for (see [`release_later`](Self::release_later)).
    pub(super) fn asked_for(&self, ttl: Duration) {
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        self.longest_ttl.fetch_max(ms, Ordering::Relaxed);
    }
}
