//! [`LockGuard`]: a held lease.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::error::LossReason;
use crate::error::{LockError, Operation};
use crate::lease::watchdog;
use crate::lease::{LeaseState, Status};
use crate::scope;
use crate::token::FencingToken;

/// What locked code does when its lease is lost while it runs: the choice
/// of `#[distributed_lock(on_lost = "...")]` and of `LockLayer::on_lost`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OnLost {
    /// Stop it: drop its future and fail with [`LockError::Lost`] (a layer
    /// answers with its lost-lease rejection). The default.
    #[default]
    Abort,
    /// Let it finish; its fenced writes are still checked downstream.
    Continue,
}

/// A held lock: a lease in the store, kept alive by a watchdog while the
/// guard lives.
///
/// - [`token`](Self::token): the fencing token to pass to every write.
/// - [`lost`](Self::lost) / [`is_held`](Self::is_held): a lease can end
///   before the guard does (store down, process paused past the lease,
///   someone deleted the key); the guard says so instead of hiding it.
/// - [`release`](Self::release): gives the lock back and reports how the
///   lease ended. Dropping the guard also releases, in the background on the
///   current Tokio runtime (the TTL is the last resort without one).
/// - [`scope`](Self::scope): runs a future as this lock's holder, so that
///   nested acquires of the same key are reentrant and
///   [`FencingToken::current`] works.
///
/// ```
/// use lock_core::Locker;
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), lock_core::LockError> {
/// let locker = Locker::memory();
/// let guard = locker.lock("order:42").ttl(Duration::from_secs(10)).await?;
/// let token = guard.token();
/// tokio::select! {
///     _ = async { /* write_with(token).await */ } => {}
///     lost = guard.lost() => return Err(lost),
/// }
/// guard.release().await?;
/// # let _ = token;
/// # Ok(())
/// # }
/// ```
#[must_use = "dropping a LockGuard releases the lock at once"]
pub struct LockGuard {
    pub(crate) lease: Arc<LeaseState>,
    role: Role,
}

enum Role {
    /// This guard took the lease; it renews and releases it.
    Owner { released: bool },
    /// A nested acquire inside the owner's scope; releasing it does nothing.
    Reentrant,
}

impl LockGuard {
    /// The guard of a lease whose watchdog has been started.
    pub(crate) fn owner(lease: Arc<LeaseState>) -> Self {
        LockGuard {
            lease,
            role: Role::Owner { released: false },
        }
    }

    pub(crate) fn reentrant(lease: Arc<LeaseState>) -> Self {
        LockGuard {
            lease,
            role: Role::Reentrant,
        }
    }

    /// The fencing token minted for this acquisition.
    pub fn token(&self) -> FencingToken {
        self.lease.token
    }

    /// The user key, as given to [`Locker::lock`](crate::Locker::lock).
    pub fn key(&self) -> &str {
        self.lease.keys.user()
    }

    /// The segment held, for a [`Locker::striped`](crate::Locker::striped)
    /// lock (`None` for every other kind).
    pub fn segment(&self) -> Option<u32> {
        self.lease.segment
    }

    /// Whether this guard took the lease itself (`false` for a reentrant
    /// acquire inside a scope that already held it).
    pub fn is_reentrant(&self) -> bool {
        matches!(self.role, Role::Reentrant)
    }

    /// A cloneable view of this lease (key, token, state, loss signal) for
    /// code that does not own the guard.
    pub fn lease(&self) -> crate::Lease {
        crate::Lease::new(Arc::clone(&self.lease))
    }

    /// Whether the lease is still held: not lost, not released, and within
    /// its local deadline. Reads the clock, so it turns `false` at the
    /// deadline even if the watchdog has not run yet (a paused process).
    pub fn is_held(&self) -> bool {
        self.lease.is_held()
    }

    /// The lease's ttl as the store granted it: the one asked for, or what
    /// the store makes of it (etcd: whole seconds and a minimum;
    /// ZooKeeper: the session timeout the server agrees to). The deadline
    /// and renewals follow it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), lock_core::LockError> {
    /// use std::time::Duration;
    ///
    /// let locker = lock_core::Locker::memory();
    /// let guard = locker.lock("order:42").ttl(Duration::from_secs(5)).await?;
    /// assert_eq!(guard.ttl(), Duration::from_secs(5));
    /// # guard.release().await
    /// # }
    /// ```
    pub fn ttl(&self) -> Duration {
        self.lease.ttl
    }

    /// Time left until the local deadline, unless renewed before (zero once
    /// passed or lost).
    pub fn expires_in(&self) -> Duration {
        self.lease.expires_in()
    }

    /// A future that resolves with [`LockError::Lost`] when the lease is
    /// lost: its deadline passed without a confirmed renewal, the store
    /// named another owner, or the maximum hold time ran out. It never
    /// resolves if the lease is released. It does not borrow the guard, so
    /// it can race the critical section in a `select!`.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub fn lost(&self) -> impl Future<Output = LockError> + Send + 'static {
        self.lease.lost()
    }

    /// Runs `body` as the holder of this lock: inside it,
    /// [`FencingToken::current`] returns this token and acquiring the same
    /// key through the same Locker is reentrant (granted at once, same
    /// token, released only by this guard).
    ///
    /// ```
    /// use lock_core::{FencingToken, Locker};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), lock_core::LockError> {
    /// let locker = Locker::memory();
    /// let guard = locker.lock("order:42").await?;
    /// guard.scope(async {
    ///     assert_eq!(FencingToken::current(), Some(guard.token()));
    ///     let nested = locker.lock("order:42").await?; // reentrant, no deadlock
    ///     assert_eq!(nested.token(), guard.token());
    ///     Ok::<_, lock_core::LockError>(())
    /// }).await?;
    /// guard.release().await
    /// # }
    /// ```
    pub fn scope<F: Future>(&self, body: F) -> crate::Scoped<F> {
        scope::enter(Arc::clone(&self.lease), body)
    }

    /// Releases the lock: stops the watchdog, removes the lease if this
    /// acquisition still owns it, and wakes the waiters.
    ///
    /// Returns [`LockError::Lost`] if the lease had been lost (the critical
    /// section may have overlapped another holder: fenced writes catch
    /// that), and never removes another owner's lock. A reentrant guard
    /// releases nothing. If the store cannot be reached, this returns
    /// [`LockError::Unavailable`] and the release goes on in the background,
    /// owner-checked, until it gets through or the lease would have ended
    /// anyway (so waiters do not wait out the whole ttl).
    ///
    /// A lease taken with
    /// [`hold_at_least`](crate::LockRequest::hold_at_least) is kept, still
    /// renewed, until that time, and released then in the background.
    ///
    /// # Cancel safety
    /// If the returned future is dropped before it completes, the guard is
    /// dropped with it and the release goes on in the background.
    pub async fn release(mut self) -> Result<(), LockError> {
        let lease = Arc::clone(&self.lease);
        let Role::Owner { released } = &mut self.role else {
            return match lease.status() {
                Status::Lost(reason) => Err(lease.lost_error(reason)),
                _ => Ok(()),
            };
        };
        if let Some(until) = lease.kept_until() {
            *released = true;
            keep_until(lease, until);
            return Ok(());
        }
        watchdog::stop(&lease);
        let locally_lost = lease.end();
        let outcome = lease.release_in_store().await;
        *released = true;
        lease.pass_front();
        match (locally_lost, outcome) {
            (Some(reason), _) => Err(lease.lost_error(reason)),
            (None, Ok(true)) => Ok(()),
            (None, Ok(false)) => Err(lease.lost_error(LossReason::OwnerChanged)),
            (None, Err(err)) => Err(LockError::from_store(
                lease.keys.user(),
                Operation::Release,
                err,
            )),
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let Role::Owner { released } = &mut self.role else {
            return;
        };
        if *released {
            return;
        }
        if let Some(until) = self.lease.kept_until() {
            keep_until(Arc::clone(&self.lease), until);
            return;
        }
        watchdog::stop(&self.lease);
        release_in_background(Arc::clone(&self.lease));
    }
}

/// Keeps `lease` (its watchdog renewing it) until `until`, then releases it
/// in the background; without a runtime it is released now.
fn keep_until(lease: Arc<LeaseState>, until: tokio::time::Instant) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        watchdog::stop(&lease);
        release_in_background(lease);
        return;
    };
    let mut kept = Kept(Some(lease));
    runtime.spawn(async move {
        tokio::time::sleep_until(until).await;
        if let Some(lease) = kept.0.take() {
            watchdog::stop(&lease);
            release_in_background(lease);
        }
    });
}

/// A kept lease whose release task may never run (its runtime shut down
/// first): when dropped with the lease still in it, the watchdog stops and
/// the Locker's local place is freed; the lease ends at its ttl.
struct Kept(Option<Arc<LeaseState>>);

impl Drop for Kept {
    fn drop(&mut self) {
        if let Some(lease) = self.0.take() {
            watchdog::stop(&lease);
            lease.end();
            lease.pass_front();
        }
    }
}

/// Releases `lease` on the current runtime, keeping its place at the front until
/// the store has answered; without a runtime the front is freed now and the
/// lease runs out at its TTL.
pub(crate) fn release_in_background(lease: Arc<LeaseState>) {
    lease.end();
    if lease.backend().answers_in_place() {
        let (keys, kind, owner) = (&lease.keys, lease.kind, lease.owner.as_str());
        let release = lease.backend().release(keys, kind, owner);
        let mut cx = Context::from_waker(Waker::noop());
        match std::pin::pin!(release).poll(&mut cx) {
            Poll::Ready(outcome) => lease.record_release(&outcome),
            // A backend that broke its word: the lease ends at its TTL.
            Poll::Pending => {
                tracing::warn!(key = %lease.keys.user(), "the store did not answer in place; the lease ends at its TTL")
            }
        }
        lease.pass_front();
        return;
    }
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            let mut release = Box::pin(async move {
                let _ = lease.release_in_store().await;
                lease.pass_front();
            });
            // One poll here sends the request at once and, on a store that
            // answers in place (memory), finishes without a task. A spawned
            // task is always polled, so a wake-up sent to the no-op waker
            // meanwhile is not lost.
            let mut cx = Context::from_waker(Waker::noop());
            if release.as_mut().poll(&mut cx).is_pending() {
                runtime.spawn(release);
            }
        }
        Err(_) => {
            tracing::warn!(key = %lease.keys.user(), "guard dropped outside a Tokio runtime; the lease ends at its TTL");
            lease.pass_front();
        }
    }
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("key", &self.lease.keys.user())
            .field("token", &self.lease.token)
            .field("held", &self.is_held())
            .field("reentrant", &self.is_reentrant())
            .finish()
    }
}
