//! [`LockRequest`]: one acquisition, from validation through local
//! queueing and waiting to a [`LockGuard`].
//!
//! Waiting does not poll: the head of the process-local line subscribes to
//! the lock's release channel, retries (so a release between the first try
//! and the subscription is not missed), then sleeps until a release
//! message, the holder's remaining TTL or its own deadline.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, sleep_until};
use tracing::Instrument;

use crate::backend::{Attempt, ReleaseSignal};
use crate::error::{LockError, Operation, StoreError};
use crate::guard::LockGuard;
use crate::keys::StoredKeys;
use crate::lease::{HeldSlot, LeaseParts, LeaseState, deadline_after};
use crate::locker::Locker;
use crate::owner::Owner;
use crate::retry::{self, Backoff};
use crate::token::FencingToken;
use crate::waiting::{Entered, LocalSlot, NoSlot};
use crate::{owner, scope, telemetry, watchdog};

/// Without a release channel, waiters look again at least this often.
const POLL_WITHOUT_CHANNEL: Duration = Duration::from_millis(100);

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
    ttl: Duration,
    wait: Duration,
    watchdog: bool,
}

/// A [`LockRequest`] whose key has been checked: what every step of an
/// acquisition works on.
struct Acquisition {
    locker: Locker,
    keys: StoredKeys,
    ttl: Duration,
    wait: Duration,
    watchdog: bool,
}

impl LockRequest {
    pub(crate) fn new(locker: Locker, key: &str) -> Self {
        let config = &locker.inner.config;
        LockRequest {
            keys: StoredKeys::new(&config.namespace, key).map_err(Box::new),
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

    /// Tries once; `Ok(None)` when the lock is held elsewhere.
    pub(crate) async fn try_once(mut self) -> Result<Option<LockGuard>, LockError> {
        self.wait = Duration::ZERO;
        match self.checked()?.run().await {
            Ok(guard) => Ok(Some(guard)),
            Err(LockError::WaitTimeout { .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// The request with its key checked, or the key's error.
    fn checked(self) -> Result<Acquisition, LockError> {
        Ok(Acquisition {
            keys: self.keys.map_err(|err| *err)?,
            locker: self.locker,
            ttl: self.ttl,
            wait: self.wait,
            watchdog: self.watchdog,
        })
    }
}

impl Acquisition {
    async fn run(self) -> Result<LockGuard, LockError> {
        if let Some(held) = self.held_in_scope() {
            return held;
        }
        self.line_up().await
    }

    /// Takes the local slot for the key (waiting in line if another task
    /// of this process has it), then works the store.
    async fn line_up(self) -> Result<LockGuard, LockError> {
        let keys = &self.keys;
        let inner = &self.locker.inner;
        let started = Instant::now();
        let deadline = started + self.wait;
        let mut first_sent = started;
        let slot = match inner.queues.try_enter(keys).map(Entered::owned) {
            Err(NoSlot::Busy) if !self.wait.is_zero() => {
                // Waiting in line is the cold path: boxed, so that the
                // future of an uncontended lock stays small.
                let slot = Box::pin(inner.queues.enter(keys, deadline)).await;
                first_sent = Instant::now();
                slot
            }
            slot => slot,
        };
        let slot = slot.map_err(|no| match no {
            NoSlot::Busy | NoSlot::TimedOut => self.timeout_error(started, None),
            NoSlot::Full => LockError::TooManyWaiters {
                key: LockError::shown(keys.user()),
                limit: inner.config.max_waiters_per_key,
            },
        })?;
        self.contend(slot, (started, first_sent), deadline).await
    }

    /// A reentrant guard (or the loss) if the calling task already holds
    /// this lock in a scope.
    fn held_in_scope(&self) -> Option<Result<LockGuard, LockError>> {
        let lease = scope::held_by_task(self.locker.inner.id, self.keys.lease())?;
        Some(match lease.status() {
            crate::lease::Status::Lost(reason) => Err(lease.lost_error(reason)),
            _ => Ok(LockGuard::reentrant(lease)),
        })
    }

    /// The uncontended lock on a store that answers in place (memory),
    /// taken there and then: no task state, no allocation beyond the lease.
    /// Anything else (a remote store, replicas to confirm, a busy line, a
    /// held lock) goes on the general path.
    fn in_place(self) -> InPlace {
        let inner = &self.locker.inner;
        if !inner.backend.answers_in_place() || inner.config.replicas.is_some() {
            return InPlace::Run(self);
        }
        if let Some(held) = self.held_in_scope() {
            return InPlace::Done(held);
        }
        let keys = &self.keys;
        let Ok(entered) = inner.queues.try_enter(keys) else {
            return InPlace::LineUp(self);
        };
        let started = Instant::now();
        let owner = owner::next();
        let attempt = inner
            .backend
            .try_acquire(keys, owner.as_str(), self.ttl)
            .into_ready()
            .ok();
        let Some(Ok(Attempt::Acquired(token))) = attempt else {
            // Held, or a store that broke its word: wait, keeping the slot.
            let slot = entered.owned();
            return InPlace::Contend(self, slot, started);
        };
        entered.into_lease();
        tracing::debug!(key = %keys.user(), %token, "lock acquired");
        let settings = self.settings();
        let guard = hold(
            self.locker,
            settings,
            (self.keys, owner),
            token,
            HeldSlot::InLine,
            started,
        );
        telemetry::acquired_at_once();
        InPlace::Done(Ok(guard))
    }

    fn settings(&self) -> Settings {
        Settings {
            ttl: self.ttl,
            watchdog: self.watchdog,
        }
    }
}

/// What a lease takes from its request.
#[derive(Clone, Copy)]
struct Settings {
    ttl: Duration,
    watchdog: bool,
}

/// The guard of a lease of `locker` just taken with `token` by a request
/// sent at `sent`, its watchdog scheduled.
fn hold(
    locker: Locker,
    settings: Settings,
    (keys, owner): (StoredKeys, Owner),
    token: FencingToken,
    slot: HeldSlot,
    sent: Instant,
) -> LockGuard {
    let ttl = settings.ttl;
    let plan = watchdog::Plan {
        renew: settings.watchdog,
        hold_until: locker.inner.config.max_hold.map(|h| sent + h),
    };
    let lease = LeaseState::new(LeaseParts {
        locker,
        keys,
        owner,
        token,
        ttl,
        deadline: deadline_after(sent, ttl),
        slot,
    });
    lease
        .locker
        .inner
        .watchdogs
        .start(Arc::clone(&lease), plan, sent, watchdog::interval(ttl));
    LockGuard::owner(lease)
}

impl Acquisition {
    fn timeout_error(&self, started: Instant, holder_expires_in: Option<Duration>) -> LockError {
        telemetry::wait_timed_out();
        tracing::debug!(key = %self.keys.user(), waited = ?started.elapsed(), "lock wait timed out");
        LockError::WaitTimeout {
            key: LockError::shown(self.keys.user()),
            waited: started.elapsed(),
            holder_expires_in,
        }
    }

    /// Holds the local slot and works the store until the lease is ours or
    /// the deadline passes.
    async fn contend(
        &self,
        slot: LocalSlot,
        (started, first_sent): (Instant, Instant),
        deadline: Instant,
    ) -> Result<LockGuard, LockError> {
        let inner = &self.locker.inner;
        let backend = &inner.backend;
        // Undo a possibly applied acquire if this future is dropped mid-request.
        let mut undo = UndoOnDrop::new(self);
        let mut channel = Channel::default();
        let mut outage: Option<Outage> = None;
        let mut sent = first_sent;
        loop {
            undo.sending = true;
            let attempt = backend.try_acquire(&self.keys, undo.owner(), self.ttl);
            let attempt = match &outage {
                None => attempt.await,
                // In an outage, no attempt runs past the outage's bound.
                Some(outage) => tokio::time::timeout_at(outage.gives_up_at, attempt)
                    .await
                    .unwrap_or_else(|_| Err(StoreError::timed_out(inner.config.timeout))),
            };
            undo.sending = false;
            match attempt {
                Ok(Attempt::Acquired(token)) => {
                    // The lease counts from this attempt, also when the store
                    // answered with a lease an earlier one took (it restarts it).
                    let lease_deadline = deadline_after(sent, self.ttl);
                    // A store in this process answered at once.
                    if !backend.answers_in_place() && Instant::now() >= lease_deadline {
                        // The answer came too late to be of use (this process
                        // or the store stalled): give it back and go on.
                        tracing::warn!(key = %self.keys.user(), %token, "acquired lease expired before the reply arrived");
                        undo.fire();
                        sent = Instant::now();
                        continue;
                    }
                    let guard = hold(
                        self.locker.clone(),
                        self.settings(),
                        (self.keys.clone(), undo.disarm()),
                        token,
                        HeldSlot::Owned(slot),
                        sent,
                    );
                    // From here a dropped future drops the guard, which releases.
                    let guard = if inner.config.replicas.is_some() {
                        Box::pin(self.confirm_replicas(guard)).await?
                    } else {
                        guard
                    };
                    tracing::debug!(key = %self.keys.user(), %token, waited = ?started.elapsed(), "lock acquired");
                    telemetry::acquired(started);
                    return Ok(guard);
                }
                Ok(Attempt::Held { remaining }) => {
                    // Another owner holds it: no attempt of ours took it.
                    undo.in_doubt = false;
                    outage = None;
                    if Instant::now() >= deadline {
                        return Err(self.timeout_error(started, remaining));
                    }
                    // Boxed like the local line: only a held lock gets here.
                    Box::pin(self.await_release(&mut channel, remaining, deadline)).await?;
                    sent = Instant::now();
                }
                Err(err) => {
                    undo.in_doubt |= err.outcome_unknown();
                    telemetry::store_error(Operation::Acquire);
                    let outage =
                        outage.get_or_insert_with(|| Outage::began(sent, inner.config.timeout));
                    let Some(retry_at) = outage.retry_at(&err, deadline) else {
                        tracing::warn!(key = %self.keys.user(), error = %err, "acquire failed: store unavailable");
                        return Err(LockError::from_store(
                            self.keys.user(),
                            Operation::Acquire,
                            err,
                        ));
                    };
                    tracing::debug!(key = %self.keys.user(), error = %err, "acquire failed; trying again while the store recovers");
                    sleep_until(retry_at).await;
                    sent = Instant::now();
                }
            }
        }
    }

    /// Waits for the holder's release: subscribes first if there is no
    /// channel yet (and returns at once, so that the caller retries with no
    /// release missed), else sleeps until a release message, the holder's
    /// remaining time or the deadline.
    async fn await_release(
        &self,
        channel: &mut Channel,
        remaining: Option<Duration>,
        deadline: Instant,
    ) -> Result<(), LockError> {
        if channel.signal.is_none() && !channel.failed {
            let subscribe = self.locker.inner.backend.subscribe(&self.keys);
            match tokio::time::timeout_at(deadline, subscribe).await {
                Ok(Ok(signal)) => {
                    channel.signal = Some(signal);
                    return Ok(());
                }
                // A cut connection: poll this time, subscribe again next.
                Ok(Err(err)) if err.is_transient() => {
                    tracing::debug!(key = %self.keys.user(), error = %err, "subscribing failed; polling until it works");
                }
                // A store that refuses this client's subscription (an ACL
                // without the channel) is told, not polled around.
                Ok(Err(err)) if err.refusal().is_some() => {
                    let key = self.keys.user();
                    return Err(LockError::from_store(key, Operation::Subscribe, err));
                }
                Ok(Err(err)) => {
                    tracing::debug!(key = %self.keys.user(), error = %err, "no release channel; polling");
                    channel.failed = true;
                }
                Err(_) => return Ok(()),
            }
        }
        let now = Instant::now();
        // At least a millisecond: a lease about to expire must not spin.
        let left = remaining.unwrap_or(self.ttl).max(Duration::from_millis(1));
        let mut wake_at = now + left;
        if channel.signal.is_none() {
            wake_at = wake_at.min(now + POLL_WITHOUT_CHANNEL);
        }
        let wake_at = wake_at.min(deadline);
        match channel.signal.as_mut() {
            Some(signal) => {
                tokio::select! {
                    open = signal.released() => if !open {
                        // The channel's connection dropped: subscribe again.
                        channel.signal = None;
                    },
                    _ = sleep_until(wake_at) => {}
                }
            }
            None => sleep_until(wake_at).await,
        }
        Ok(())
    }

    /// Replica acknowledgement: on failure the lease is released and the
    /// acquire fails.
    async fn confirm_replicas(&self, guard: LockGuard) -> Result<LockGuard, LockError> {
        let Some((wanted, within)) = self.locker.inner.config.replicas else {
            return Ok(guard);
        };
        let confirmed = self
            .locker
            .inner
            .backend
            .confirm_replicas(wanted, within)
            .await;
        let failure = match confirmed {
            Ok(n) if n >= wanted => return Ok(guard),
            Ok(n) => LockError::ReplicasNotConfirmed {
                key: LockError::shown(self.keys.user()),
                wanted,
                confirmed: n,
            },
            Err(err) => LockError::from_store(self.keys.user(), Operation::ConfirmReplicas, err),
        };
        // Whatever the release says, the acquire has failed.
        let _ = guard.release().await;
        Err(failure)
    }
}

/// A waiter's subscription to the lock's releases.
#[derive(Default)]
struct Channel {
    signal: Option<ReleaseSignal>,
    /// Subscribing cannot work (the store has no channel): poll instead.
    failed: bool,
}

/// Store errors met in a row by one acquisition. A waiter treats a broken
/// connection as one more reason to wait, but not past its deadline, and
/// not once the store has failed for longer than the Locker's timeout (an
/// outage then fails every request in about that time, not after each
/// one's whole wait). Refusals and error answers are not waited out.
struct Outage {
    /// When the outage has lasted the Locker's timeout.
    gives_up_at: Instant,
    backoff: Backoff,
}

impl Outage {
    /// An outage met by the attempt sent at `sent`, bounded by `timeout`.
    fn began(sent: Instant, timeout: Duration) -> Self {
        Outage {
            gives_up_at: sent + timeout,
            // Soon after a cut (the connection is being replaced), then less
            // often the longer the store stays away.
            backoff: Backoff::new(Duration::from_millis(10), Duration::from_millis(250)),
        }
    }

    /// When to try again after `err`, or `None` to give up.
    fn retry_at(&mut self, err: &StoreError, deadline: Instant) -> Option<Instant> {
        let at = Instant::now() + self.backoff.pause();
        let waits_out = err.is_transient() && at < self.gives_up_at;
        waits_out
            .then(|| at.min(deadline))
            .filter(|at| *at < deadline)
    }
}

/// Releases by owner value in the background if dropped while an acquire
/// with the current owner value may have taken the lock: one on its way
/// (the future was dropped mid-request), or one whose outcome is unknown
/// (timed out, or its connection broke after sending).
struct UndoOnDrop<'a> {
    acquisition: &'a Acquisition,
    owner: Option<Owner>,
    /// A request with the current owner value is on its way.
    sending: bool,
    /// An earlier request with it may have taken the lock.
    in_doubt: bool,
}

impl<'a> UndoOnDrop<'a> {
    /// Disarmed, with a fresh owner value.
    fn new(acquisition: &'a Acquisition) -> Self {
        UndoOnDrop {
            acquisition,
            owner: Some(owner::next()),
            sending: false,
            in_doubt: false,
        }
    }

    /// The owner value the next attempt is sent with.
    fn owner(&self) -> &str {
        self.owner
            .as_ref()
            .expect("the owner value is taken only on success")
            .as_str()
    }

    /// The lease is ours: hand over the owner value.
    fn disarm(&mut self) -> Owner {
        (self.sending, self.in_doubt) = (false, false);
        self.owner.take().expect("disarmed once")
    }

    /// Releases by the current owner value in the background, again while
    /// the store fails transiently (until a lease it took would have ended);
    /// later attempts use a fresh owner value, so that release cannot touch
    /// them.
    fn fire(&mut self) {
        (self.sending, self.in_doubt) = (false, false);
        let Some(owner) = self.owner.as_mut() else {
            return;
        };
        let owner = std::mem::replace(owner, owner::next());
        let keys = self.acquisition.keys.clone();
        let backend = Arc::clone(&self.acquisition.locker.inner.backend);
        // The latest send of the acquire was before now: its lease ends by then.
        let runs_out = Instant::now() + self.acquisition.ttl;
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let owner = owner.as_str();
                if let Err(err) = backend.release(&keys, owner).await
                    && err.is_transient()
                {
                    retry::release_until(&*backend, &keys, owner, runs_out).await;
                }
            });
        }
    }
}

impl Drop for UndoOnDrop<'_> {
    fn drop(&mut self) {
        if self.sending || self.in_doubt {
            self.fire();
        }
    }
}

impl IntoFuture for LockRequest {
    type Output = Result<LockGuard, LockError>;
    type IntoFuture = LockFuture;

    fn into_future(self) -> LockFuture {
        LockFuture(Stage::Start(Some(self)))
    }
}

/// What [`LockRequest::in_place`] came to.
enum InPlace {
    Done(Result<LockGuard, LockError>),
    /// The general path, from the start.
    Run(Acquisition),
    /// The general path, from the local line.
    LineUp(Acquisition),
    /// The general path, holding the local slot, from the store request
    /// first sent at the instant.
    Contend(Acquisition, LocalSlot, Instant),
}

/// The future of a [`LockRequest`], which `.await` runs.
///
/// On a store that answers in place (the memory backend) an uncontended
/// lock is taken at the first poll, without allocating a task's worth of
/// state; every other acquisition runs boxed, in a `lock` tracing span.
/// Cancel safe as [`LockRequest`] says.
#[must_use = "a LockFuture does nothing until awaited"]
pub struct LockFuture(Stage);

enum Stage {
    Start(Option<LockRequest>),
    Running(Pin<Box<dyn Future<Output = Result<LockGuard, LockError>> + Send>>),
}

impl Future for LockFuture {
    type Output = Result<LockGuard, LockError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let stage = &mut self.get_mut().0;
        if let Stage::Start(request) = stage {
            let request = request.take().expect("LockFuture polled after completion");
            let acquisition = match request.checked() {
                Ok(acquisition) => acquisition,
                Err(err) => return Poll::Ready(Err(err)),
            };
            let span = |acquisition: &Acquisition| tracing::debug_span!("lock", key = %LockError::shown(acquisition.keys.user()));
            let general: Pin<Box<dyn Future<Output = _> + Send>> = match acquisition.in_place() {
                InPlace::Done(result) => return Poll::Ready(result),
                InPlace::Run(acquisition) => {
                    let span = span(&acquisition);
                    Box::pin(acquisition.run().instrument(span))
                }
                InPlace::LineUp(acquisition) => {
                    let span = span(&acquisition);
                    Box::pin(acquisition.line_up().instrument(span))
                }
                InPlace::Contend(acquisition, slot, started) => {
                    let span = span(&acquisition);
                    let deadline = started + acquisition.wait;
                    Box::pin(
                        async move {
                            let sent = Instant::now();
                            acquisition.contend(slot, (started, sent), deadline).await
                        }
                        .instrument(span),
                    )
                }
            };
            *stage = Stage::Running(general);
        }
        match stage {
            Stage::Running(general) => general.as_mut().poll(cx),
            Stage::Start(_) => Poll::Pending,
        }
    }
}

impl std::fmt::Debug for LockFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let stage = match &self.0 {
            Stage::Start(_) => "start",
            Stage::Running(_) => "running",
        };
        f.debug_tuple("LockFuture").field(&stage).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::future::{Future, IntoFuture};
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use crate::Locker;

    #[tokio::test]
    async fn an_uncontended_lock_in_process_is_taken_at_the_first_poll() {
        let locker = Locker::memory();
        let mut future = pin!(locker.lock("k").into_future());
        let Poll::Ready(guard) = future
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        else {
            panic!("an in-process store with the key free answers at once");
        };
        let guard = guard.unwrap();
        assert!(guard.is_held());
        assert_eq!(locker.local_lines(), 1);
        guard.release().await.unwrap();
        assert_eq!(locker.local_lines(), 0, "the line ends with the lease");
    }

    #[tokio::test]
    async fn a_held_lock_in_process_waits_and_is_then_taken() {
        let locker = Locker::memory();
        let held = locker.lock("k").await.unwrap();
        let mut waiting = Box::pin(locker.lock("k").into_future());
        let polled = waiting
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()));
        assert!(polled.is_pending(), "the key is held");
        let first = held.token();
        held.release().await.unwrap();
        let next = waiting.await.unwrap();
        assert!(next.token() > first);
        next.release().await.unwrap();
        assert_eq!(locker.local_lines(), 0);
    }

    #[tokio::test]
    async fn an_invalid_key_fails_at_the_first_poll() {
        let locker = Locker::memory();
        let err = locker.lock("").await.unwrap_err();
        assert!(matches!(err, crate::LockError::InvalidKey { .. }), "{err}");
    }
}
