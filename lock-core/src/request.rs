//! [`LockRequest`]: one acquisition's options, awaited as a
//! [`LockFuture`](crate::LockFuture).

use std::future::IntoFuture;
use std::time::Duration;

use crate::acquire::Acquisition;
use crate::backend::Claim;
use crate::error::LockError;
use crate::future::LockFuture;
use crate::guard::LockGuard;
use crate::keys::StoredKeys;
use crate::locker::Locker;

/// A request for one lock, made by [`Locker::lock`]; set options, then
/// `.await` it.
///
/// ```
/// use lock_core::{LockError, Locker};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), LockError> {
/// let locker = Locker::memory();
/// let guard = locker
///     .lock("invoice:7")
///     .ttl(Duration::from_secs(5))   // lease length, renewed every ttl/3
///     .wait(Duration::from_secs(1))  // zero: try once
///     .watchdog(true)
///     .await?;
/// guard.release().await
/// # }
/// ```
///
/// # Cancel safety
/// Dropping the future at any await point never leaves a lock held: before
/// the lease exists nothing is stored; a store request that was in flight
/// and may have been applied is undone by owner value in the background
/// (or runs out at its TTL); once the guard exists, dropping it releases.
#[must_use = "a LockRequest does nothing until awaited"]
#[derive(Debug)]
pub struct LockRequest {
    locker: Locker,
    /// The key's stored names, laid out when the request is made (a bad
    /// key's error is returned when the request is awaited; boxed, so
    /// that every request stays small).
    keys: Result<StoredKeys, Box<LockError>>,
    claim: Claim,
    ttl: Duration,
    wait: Duration,
    watchdog: bool,
}

impl LockRequest {
    pub(crate) fn new(locker: Locker, key: &str) -> Self {
        let config = &locker.inner.config;
        LockRequest {
            keys: StoredKeys::new(&config.namespace, key).map_err(Box::new),
            claim: Claim::Exclusive,
            ttl: config.ttl,
            wait: config.wait,
            watchdog: config.watchdog,
            locker,
        }
    }

    /// Lease length (at least 30 ms; shorter values are raised to it).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl.max(crate::locker::MIN_TTL);
        self
    }

    /// How long to wait for a held lock before [`LockError::WaitTimeout`];
    /// zero tries once.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Whether the lease is renewed while the guard lives. Without it the
    /// lease ends at its ttl and the guard reports it lost.
    pub fn watchdog(mut self, watchdog: bool) -> Self {
        self.watchdog = watchdog;
        self
    }

    /// Asks for `claim` instead of an exclusive lease; a count out of
    /// bounds is an error when the request is awaited.
    pub(crate) fn claim(mut self, claim: Claim) -> Self {
        let count = match claim {
            Claim::Permit { of } => Some(("permits", of)),
            Claim::Segment { of } => Some(("segments", of)),
            _ => None,
        };
        if let Some((what, n)) = count
            && !(1..=MAX_COUNT).contains(&n)
        {
            let reason = format!("{n} is not between 1 and {MAX_COUNT}");
            self.keys = Err(Box::new(LockError::invalid_config(what, reason)));
        }
        self.claim = claim;
        self
    }

    /// Tries once; `Ok(None)` when the lock is held elsewhere.
    pub(crate) async fn try_once(mut self) -> Result<Option<LockGuard>, LockError> {
        self.wait = Duration::ZERO;
        match self.checked()?.first_step().finish().await {
            Ok(guard) => Ok(Some(guard)),
            Err(LockError::WaitTimeout { .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// The request with its key and claim checked (before any store round
    /// trip), or the error.
    pub(crate) fn checked(self) -> Result<Acquisition, LockError> {
        let keys = self.keys.map_err(|err| *err)?;
        let backend = &self.locker.inner.backend;
        if !backend.supports(self.claim) {
            return Err(LockError::Unsupported {
                key: LockError::shown(keys.user()),
                claim: self.claim,
                store: backend.describe(),
            });
        }
        Ok(Acquisition {
            keys,
            claim: self.claim,
            locker: self.locker,
            ttl: self.ttl,
            wait: self.wait,
            watchdog: self.watchdog,
        })
    }
}

/// The most permits of a semaphore, or segments of a striped lock.
pub const MAX_COUNT: u32 = 1024;

impl IntoFuture for LockRequest {
    type Output = Result<LockGuard, LockError>;
    type IntoFuture = LockFuture;

    fn into_future(self) -> LockFuture {
        LockFuture::new(self)
    }
}

#[cfg(test)]
mod tests;
