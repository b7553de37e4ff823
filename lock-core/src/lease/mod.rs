//! One acquisition's lease: [`LeaseState`], shared by its guard, its
//! watchdog and the task-local scope (deadline, loss signal, the
//! process-local front, and what it needs of its Locker: the store, the
//! local queues and a watchdog handle), and [`Lease`], the public view of it.

pub(crate) mod watchdog;

use self::watchdog::Control;

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::backend::LockStore;
use crate::backend::release_until;
use crate::backend::stored_keys::StoredKeys;
use crate::deadline::drift;
use crate::error::StoreError;
use crate::error::{LockError, LossReason};
use crate::kind::LockKind;
use crate::local_queue::{HeldFront, LocalQueues};
use crate::owner::Owner;
use crate::token::FencingToken;

/// Where a lease stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Held,
    Lost(LossReason),
    Released,
}

pub(crate) struct LeaseState {
    /// The store the lease is in.
    backend: Arc<dyn LockStore>,
    /// The plain-lock queues of the Locker that took it (where a plain
    /// lock's front is).
    queues: Arc<LocalQueues>,
    /// Which Locker took it (a task's scope is reentrant per Locker).
    pub(crate) locker_id: u64,
    pub(crate) keys: StoredKeys,
    /// What the lease is of (renewals and the release name it).
    pub(crate) kind: LockKind,
    pub(crate) owner: Owner,
    pub(crate) token: FencingToken,
    /// The ttl the store granted.
    pub(crate) ttl: Duration,
    /// The segment held, for a striped lock.
    pub(crate) segment: Option<u32>,
    deadline: Mutex<Instant>,
    /// Released no sooner than this (`hold_at_least`), once armed.
    kept_until: Option<Instant>,
    /// Whether the guard was handed over, so that `kept_until` holds.
    keep_armed: AtomicBool,
    status: Mutex<Status>,
    /// Told when the lease is lost (`lost()` futures wait on it).
    loss: Notify,
    front: Mutex<Option<HeldFront>>,
    watchdog: Mutex<Control>,
}

/// What a new lease is made of.
pub(crate) struct LeaseParts {
    pub(crate) backend: Arc<dyn LockStore>,
    pub(crate) queues: Arc<LocalQueues>,
    pub(crate) locker_id: u64,
    pub(crate) keys: StoredKeys,
    pub(crate) kind: LockKind,
    pub(crate) owner: Owner,
    pub(crate) token: FencingToken,
    pub(crate) ttl: Duration,
    pub(crate) segment: Option<u32>,
    pub(crate) deadline: Instant,
    /// Released no sooner than this (`hold_at_least`).
    pub(crate) kept_until: Option<Instant>,
    pub(crate) front: HeldFront,
}

impl LeaseState {
    /// Wakes the key's subscribers ([`LockStore::announce`]): an election's
    /// leader tells its observers that it began or ended.
    pub(crate) async fn announce(&self) {
        if let Err(err) = self.backend.announce(&self.keys, self.kind).await {
            // Observers still look again when the lease would end.
            tracing::debug!(key = %self.keys.user(), error = %err, "announcing a change of leader failed");
        }
    }

    pub(crate) fn new(parts: LeaseParts) -> Arc<Self> {
        Arc::new(LeaseState {
            backend: parts.backend,
            queues: parts.queues,
            locker_id: parts.locker_id,
            keys: parts.keys,
            kind: parts.kind,
            owner: parts.owner,
            token: parts.token,
            ttl: parts.ttl,
            segment: parts.segment,
            deadline: Mutex::new(parts.deadline),
            kept_until: parts.kept_until,
            keep_armed: AtomicBool::new(false),
            status: Mutex::new(Status::Held),
            loss: Notify::new(),
            front: Mutex::new(Some(parts.front)),
            watchdog: Mutex::new(Control::Stopped),
        })
    }

    /// Makes a release before `kept_until` keep the lease (the guard is
    /// the caller's now).
    pub(crate) fn arm_keep(&self) {
        self.keep_armed.store(true, Ordering::Release);
    }

    /// Until when the lease is kept after its guard is done, if that is
    /// still ahead and the lease held (`hold_at_least`).
    pub(crate) fn kept_until(&self) -> Option<Instant> {
        let armed = self.keep_armed.load(Ordering::Acquire);
        self.kept_until
            .filter(|until| armed && *until > Instant::now() && self.is_held())
    }

    /// The store the lease is in.
    pub(crate) fn backend(&self) -> &dyn LockStore {
        &*self.backend
    }

    /// Where this lease's watchdog stands.
    pub(crate) fn watchdog(&self) -> MutexGuard<'_, Control> {
        self.watchdog.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn deadline(&self) -> Instant {
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves the deadline after a confirmed renewal.
    pub(crate) fn extend(&self, deadline: Instant) {
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner) = deadline;
    }

    pub(crate) fn status(&self) -> Status {
        *self.status.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Time left until the local deadline unless renewed (zero once lost,
    /// released or past).
    pub(crate) fn expires_in(&self) -> Duration {
        if self.status() != Status::Held {
            return Duration::ZERO;
        }
        self.deadline().saturating_duration_since(Instant::now())
    }

    /// Held and within the local deadline. Reads the clock, so a holder that
    /// was paused past its deadline sees `false` before the watchdog runs.
    pub(crate) fn is_held(&self) -> bool {
        self.status() == Status::Held && Instant::now() < self.deadline()
    }

    /// Records the loss once, frees the process-local front (another task
    /// may now contend at the store), and tells every `lost()` waiter.
    pub(crate) fn mark_lost(&self, reason: LossReason) {
        if self.leave_held(Status::Lost(reason)) {
            // The front first: whoever hears of the loss finds the queue free.
            self.pass_front();
            self.loss.notify_waiters();
            tracing::warn!(key = %self.keys.user(), token = %self.token, %reason, "lock lease lost");
            crate::telemetry::lost(reason);
        }
    }

    /// Ends the lease's local life when its guard goes: a lease already lost,
    /// or past its deadline, is (reported) lost, so `lost()` watchers hear
    /// of it; any other is released. Returns why it was lost, if it was.
    pub(crate) fn end(&self) -> Option<LossReason> {
        match self.status() {
            Status::Lost(reason) => Some(reason),
            _ if Instant::now() >= self.deadline() => {
                self.mark_lost(LossReason::NotRenewedInTime);
                Some(LossReason::NotRenewedInTime)
            }
            _ => {
                self.mark_released();
                None
            }
        }
    }

    /// Removes the lease from the store by owner value (never another
    /// owner's), logging and counting the outcome. A transient failure is
    /// retried in the background until the lease would have ended anyway
    /// ([`release_until`]).
    pub(crate) async fn release_in_store(self: &Arc<Self>) -> Result<bool, StoreError> {
        let outcome = self
            .backend()
            .release(&self.keys, self.kind, self.owner.as_str())
            .await;
        self.record_release(&outcome);
        if let Err(err) = &outcome
            && err.is_transient()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let lease = Arc::clone(self);
            // The store's expiry is about the local deadline plus the drift.
            let runs_out = lease.deadline() + drift(lease.ttl);
            runtime.spawn(async move {
                let owner = lease.owner.as_str();
                let (backend, keys, kind) = (lease.backend(), &lease.keys, lease.kind);
                match release_until(backend, keys, kind, owner, runs_out).await {
                    Some(outcome) => lease.record_release(&outcome),
                    None => tracing::debug!(key = %lease.keys.user(), token = %lease.token, "release not confirmed; the lease runs out at its ttl"),
                }
            });
        }
        outcome
    }

    /// Logs and counts how a release in the store went.
    pub(crate) fn record_release(&self, outcome: &Result<bool, StoreError>) {
        tracing::debug!(key = %self.keys.user(), token = %self.token, ?outcome, "lock released");
        match outcome {
            // A lost lease was counted as lost; removing it is cleanup.
            Ok(_) if matches!(self.status(), Status::Lost(_)) => {}
            Ok(_) => crate::telemetry::released(),
            Err(_) => crate::telemetry::store_error(crate::error::Operation::Release),
        }
    }

    /// Records a release (so `lost()` never fires for it).
    pub(crate) fn mark_released(&self) {
        self.leave_held(Status::Released);
    }

    /// Moves a held lease to `next`; false if it had already left `Held`.
    fn leave_held(&self, next: Status) -> bool {
        let mut status = self.status.lock().unwrap_or_else(PoisonError::into_inner);
        let held = *status == Status::Held;
        if held {
            *status = next;
        }
        held
    }

    pub(crate) fn pass_front(&self) {
        let front = self
            .front
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match front {
            Some(HeldFront::Owned(front)) => drop(front),
            Some(HeldFront::Placed(place)) => drop(place),
            Some(HeldFront::InQueue) => self.queues.leave(&self.keys),
            Some(HeldFront::HandedOn) | None => {}
        }
    }

    /// The error a holder of this lease gets once it is lost.
    pub(crate) fn lost_error(&self, reason: LossReason) -> LockError {
        LockError::Lost {
            key: LockError::shown(self.keys.user()),
            token: self.token,
            reason,
        }
    }

    /// Resolves with the loss error when the lease is lost (also if the
    /// guard is gone by the time it is polled); never resolves if it is
    /// released instead. Costs no allocation: most leases are released, and
    /// a layer watches every one of them.
    pub(crate) fn lost(
        self: &Arc<Self>,
    ) -> impl std::future::Future<Output = LockError> + Send + 'static {
        let lease = Arc::clone(self);
        async move {
            loop {
                let notified = lease.loss.notified();
                let mut notified = std::pin::pin!(notified);
                // Registered before the status is read: a loss in between
                // still wakes this future.
                notified.as_mut().enable();
                match lease.status() {
                    Status::Lost(reason) => return lease.lost_error(reason),
                    Status::Released => std::future::pending::<()>().await,
                    Status::Held => notified.await,
                }
            }
        }
    }
}

/// A view of one acquisition: its key, its token, whether it is still held,
/// and a signal when it is lost. Cheap to clone; holding it does not keep
/// the lock (the [`LockGuard`](crate::LockGuard) does).
///
/// ```
/// use lock_core::Locker;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), lock_core::LockError> {
/// let locker = Locker::memory();
/// let guard = locker.lock("order:42").await?;
/// let lease = guard.lease();
/// assert_eq!(lease.key(), "order:42");
/// assert_eq!(lease.token(), guard.token());
/// guard.release().await?;
/// assert!(!lease.is_held());
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Lease {
    state: Arc<LeaseState>,
}

impl Lease {
    pub(crate) fn new(state: Arc<LeaseState>) -> Self {
        Lease { state }
    }

    /// The user key.
    pub fn key(&self) -> &str {
        self.state.keys.user()
    }

    /// The fencing token of this acquisition.
    pub fn token(&self) -> FencingToken {
        self.state.token
    }

    /// Held: not lost, not released, within the local deadline.
    pub fn is_held(&self) -> bool {
        self.state.is_held()
    }

    /// Time left until the local deadline unless renewed (zero once over).
    pub fn expires_in(&self) -> Duration {
        self.state.expires_in()
    }

    /// Resolves with [`LockError::Lost`] when the lease is lost; never if it
    /// is released.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub fn lost(&self) -> impl Future<Output = LockError> + Send + 'static {
        self.state.lost()
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("key", &self.key())
            .field("token", &self.token())
            .field("held", &self.is_held())
            .finish()
    }
}
