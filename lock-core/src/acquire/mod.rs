//! The acquisition path: from a checked request to a [`LockGuard`], through
//! the task's scope (a reentrant lock), the process-local queue and the
//! store.
//!
//! Waiting does not poll: the front of the process-local queue subscribes to
//! the lock's release channel, retries (so a release between the first try
//! and the subscription is not missed), then sleeps until a release
//! message, the holder's remaining TTL or its own deadline. A transient
//! store error is one more reason to wait (see [`Outage`]).

mod outage;
mod subscription;
mod undo;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, sleep_until};

use crate::backend::stored_keys::StoredKeys;
use crate::backend::{Attempt, Grant};
use crate::deadline::deadline_after;
use crate::error::StoreError;
use crate::error::{LockError, Operation};
use crate::fair_waiters::FairPlace;
use crate::guard::LockGuard;
use crate::kind::LockKind;
use crate::lease::watchdog;
use crate::lease::{LeaseParts, LeaseState, Status};
use crate::local_queue::{Front, HeldFront, LocalQueues, NoFront};
use crate::locker::Locker;
use crate::owner::{self, Owner};
use crate::{scope, telemetry};

use self::outage::Outage;
use self::subscription::Subscription;
use self::undo::UndoOnDrop;

/// A request whose key has been checked: what every step works on.
pub(crate) struct Acquisition {
    pub(crate) locker: Locker,
    pub(crate) keys: StoredKeys,
    /// What is asked of the store (one the store keeps).
    pub(crate) kind: LockKind,
    pub(crate) ttl: Duration,
    pub(crate) wait: Duration,
    pub(crate) watchdog: bool,
    /// How long after the send the lease is kept at least.
    pub(crate) hold_at_least: Option<Duration>,
    /// The value an election's candidate publishes with its lease,
    /// encoded ([`owner::published`]).
    pub(crate) published: Option<Arc<str>>,
    /// A try (`try_lock`, `if_held_skip`): a held lock is a skip, counted
    /// as one rather than as a timed-out wait.
    pub(crate) skip_if_held: bool,
}

/// Where an acquisition stands after its first step.
pub(crate) enum FirstStep {
    /// Done without waiting.
    Done(Result<LockGuard, LockError>),
    /// To take its place in the local queue, then work the store.
    Queue(Acquisition),
    /// At the front of the local queue, to work the store.
    Front(Acquisition, Contender),
}

/// An acquisition at the front of its local queue, or a fair one with its
/// place.
pub(crate) struct Contender {
    front: LocalTurn,
    /// When the request began (its wait counts from here).
    started: Instant,
    /// `Some(remaining)` if the store already answered that another owner
    /// holds it (with the holder's remaining time).
    held: Option<Option<Duration>>,
}

/// What a request holds in its process while it works the store.
enum LocalTurn {
    /// The front of its local queue.
    Front(Front),
    /// A fair request's place: it waits beside this Locker's other fair
    /// requests, each with its own queue entry in the store; `first_send`
    /// keeps it at the front of the key's send queue until its first try
    /// is answered.
    FairPlace {
        place: FairPlace,
        first_send: Option<Front>,
    },
}

/// A lease just taken: the store's grant, and what the lease keeps of the
/// acquisition.
struct NewLease {
    owner: Owner,
    grant: Grant,
    front: HeldFront,
    /// When the request that took it was sent: the lease counts from here.
    sent: Instant,
}

impl Acquisition {
    /// A fresh owner value for this acquisition, with the value it publishes.
    pub(crate) fn new_owner(&self) -> Owner {
        owner::next(self.locker.owner_prefix(), self.published.as_deref())
    }

    /// What can be done at once, without a task's worth of state: the
    /// scope (a reentrant lock) and, on a store that answers in place (the
    /// memory backend), the local queue and one try at the store.
    // A fast path for the uncontended in-process lock: it pays
    // (`layer_instructions`, bench/README.md).
    pub(crate) fn first_step(self) -> FirstStep {
        if let Some(held) = self.held_in_scope() {
            return FirstStep::Done(held);
        }
        let locker = &self.locker;
        // A kind that may queue leaves a queue entry to keep: the general path.
        let plain = self.kind == LockKind::Exclusive;
        if !plain || !locker.backend().answers_in_place() || locker.config().replicas.is_some() {
            return FirstStep::Queue(self);
        }
        let Ok(first) = locker.plain_queues().try_enter(&self.keys) else {
            return FirstStep::Queue(self);
        };
        let started = Instant::now();
        let owner = self.new_owner();
        let answer = locker
            .backend()
            .acquire(&self.keys, self.kind, owner.as_str(), self.ttl)
            .into_ready()
            .ok();
        let held = match answer {
            Some(Ok(Attempt::Acquired(grant))) => {
                let front = first.into_held();
                tracing::debug!(key = %self.keys.user(), token = %grant.token, "lock acquired");
                telemetry::acquired_at_once(self.keys.user());
                let taken = NewLease {
                    owner,
                    grant,
                    front,
                    sent: started,
                };
                return FirstStep::Done(Ok(self.hold(taken)));
            }
            Some(Ok(Attempt::Held { remaining })) => Some(remaining),
            // A store that broke its word (no answer in place, or an
            // error): the general path asks again.
            _ => None,
        };
        let front = LocalTurn::Front(first.owned());
        FirstStep::Front(
            self,
            Contender {
                front,
                started,
                held,
            },
        )
    }

    /// A reentrant guard (or the loss) if the calling task already holds
    /// this lock in a scope.
    fn held_in_scope(&self) -> Option<Result<LockGuard, LockError>> {
        let held =
            |kinds: &[LockKind]| scope::held_by_task(self.locker.id(), self.keys.lease(), kinds);
        let lease = match self.kind {
            // A read inside a write of the key is covered by the write.
            LockKind::Read => held(&[LockKind::Read, LockKind::Write])?,
            // A write inside a read would wait for itself.
            LockKind::Write => match held(&[LockKind::Write]) {
                Some(lease) => lease,
                None => {
                    held(&[LockKind::Read])?;
                    let key = LockError::shown(self.keys.user());
                    return Some(Err(LockError::UpgradeWouldDeadlock { key }));
                }
            },
            kind => held(&[kind])?,
        };
        Some(match lease.status() {
            Status::Lost(reason) => Err(lease.lost_error(reason)),
            _ => Ok(LockGuard::reentrant(lease)),
        })
    }

    /// Waits to reach the front of the key's local queue (behind other
    /// tasks of this process), then works the store.
    pub(crate) async fn queue_up(self) -> Result<LockGuard, LockError> {
        let locker = &self.locker;
        let started = Instant::now();
        if self.kind == LockKind::Fair {
            // Served in the order requests reached the store: each takes its
            // queue entry now, not when it would reach the front of a local
            // queue. Its first try waits to reach the front of the send queue,
            // so the store queues this process's
            // requests in call order.
            let first_send = self.take_front(locker.fair_sends(), started).await?;
            let place = locker
                .fair_places()
                .take(&self.keys)
                .ok_or_else(|| self.too_many())?;
            let head = Contender {
                front: LocalTurn::FairPlace {
                    place,
                    first_send: Some(first_send),
                },
                started,
                held: None,
            };
            return self.contend(head).await;
        }
        // Every kind has queues of its own (see `KindQueues`): one task at a
        // time asks the store.
        let front = self
            .take_front(locker.queues_of(self.kind), started)
            .await?;
        let head = Contender {
            front: LocalTurn::Front(front),
            started,
            held: None,
        };
        self.contend(head).await
    }

    /// The front for the key in `queues`, waiting in queue (FIFO) until the
    /// request's deadline.
    async fn take_front(
        &self,
        queues: &Arc<LocalQueues>,
        started: Instant,
    ) -> Result<Front, LockError> {
        let front = match queues.try_enter(&self.keys) {
            Ok(first) => Ok(first.owned()),
            Err(NoFront::Busy) if !self.wait.is_zero() => {
                // Waiting in queue is the cold path: boxed, so that the
                // future of an uncontended lock stays small.
                Box::pin(queues.enter(&self.keys, started + self.wait)).await
            }
            Err(no) => Err(no),
        };
        front.map_err(|no| match no {
            NoFront::Busy | NoFront::TimedOut => self.timeout_error(started, None),
            NoFront::Full => self.too_many(),
        })
    }

    fn too_many(&self) -> LockError {
        LockError::TooManyWaiters {
            key: LockError::shown(self.keys.user()),
            limit: self.locker.config().max_waiters_per_key,
        }
    }

    /// Holds the front in the local queue and works the store until the lease is ours or
    /// the deadline passes.
    pub(crate) async fn contend(self, head: Contender) -> Result<LockGuard, LockError> {
        let Contender {
            mut front,
            started,
            mut held,
        } = head;
        let deadline = started + self.wait;
        let locker = &self.locker;
        let backend = &locker.backend();
        // Undo a possibly applied acquire if this future is dropped mid-request.
        let mut undo = UndoOnDrop::new(&self);
        let mut subscription = Subscription::default();
        let mut outage: Option<Outage> = None;
        loop {
            let sent = Instant::now();
            let attempt = match held.take() {
                Some(remaining) => Ok(Attempt::Held { remaining }),
                None => self.ask(&mut undo, outage.as_ref()).await,
            };
            if let LocalTurn::FairPlace { first_send, .. } = &mut front {
                // Answered: the next fair request of this process may ask.
                first_send.take();
            }
            match attempt {
                Ok(Attempt::Acquired(grant)) => {
                    let token = grant.token;
                    // The lease counts from this attempt, also when the store
                    // answered with a lease an earlier one took (it restarts it).
                    // A store in this process answered at once.
                    if !backend.answers_in_place()
                        && Instant::now() >= deadline_after(sent, grant.ttl)
                    {
                        // The answer came too late to be of use (this process
                        // or the store stalled): give it back and go on.
                        tracing::warn!(key = %self.keys.user(), %token, "acquired lease expired before the reply arrived");
                        undo.fire();
                        continue;
                    }
                    let owner = undo.disarm();
                    let front = self.front_once_granted(front);
                    let guard = self.hold(NewLease {
                        owner,
                        grant,
                        front,
                        sent,
                    });
                    return self.granted(guard, started).await;
                }
                Ok(attempt @ (Attempt::Held { remaining } | Attempt::Queued { remaining })) => {
                    // Held: no attempt of ours took it. Queued: our queue entry
                    // stands in the store, withdrawn if we give up.
                    let queued = matches!(attempt, Attempt::Queued { .. });
                    undo.in_doubt = queued;
                    outage = None;
                    if Instant::now() >= deadline {
                        if queued {
                            undo.withdraw().await;
                        }
                        return Err(self.timeout_error(started, remaining));
                    }
                    // Boxed like the local queue: only a held lock gets here.
                    let queued_owner = queued.then(|| undo.owner());
                    let released =
                        subscription.wait_for_release(&self, queued_owner, remaining, deadline);
                    Box::pin(released).await?;
                }
                Err(err) => {
                    undo.in_doubt |= err.outcome_unknown();
                    telemetry::store_error(Operation::Acquire);
                    let timeout = locker.config().timeout;
                    let outage = outage.get_or_insert_with(|| Outage::began(sent, timeout));
                    let Some(retry_at) = outage.retry_at(&err, deadline) else {
                        tracing::warn!(key = %self.keys.user(), error = %err, "acquire failed: store unavailable");
                        let key = self.keys.user();
                        return Err(LockError::from_store(key, Operation::Acquire, err));
                    };
                    tracing::debug!(key = %self.keys.user(), error = %err, "acquire failed; trying again while the store recovers");
                    sleep_until(retry_at).await;
                }
            }
        }
    }

    /// One acquire sent to the store with `undo`'s owner value; in an
    /// outage, bounded by the outage's end.
    async fn ask(
        &self,
        undo: &mut UndoOnDrop<'_>,
        outage: Option<&Outage>,
    ) -> Result<Attempt, StoreError> {
        undo.sending = true;
        let backend = self.locker.backend();
        let attempt = backend.acquire(&self.keys, self.kind, undo.owner(), self.ttl);
        let attempt = match outage {
            None => attempt.await,
            Some(outage) => tokio::time::timeout_at(outage.gives_up_at, attempt)
                .await
                .unwrap_or_else(|_| Err(StoreError::timed_out(self.locker.config().timeout))),
        };
        undo.sending = false;
        attempt
    }

    /// What the lease keeps of this request's local turn: a fair request its
    /// place, a plain lock its front; the other kinds hand the front on, so
    /// that the next task of this process asks the store at once (a writer,
    /// to mark the key before readers pass it).
    fn front_once_granted(&self, turn: LocalTurn) -> HeldFront {
        match turn {
            LocalTurn::FairPlace { place, .. } => HeldFront::Placed(place),
            LocalTurn::Front(front) if self.kind == LockKind::Exclusive => HeldFront::Owned(front),
            LocalTurn::Front(_) => HeldFront::HandedOn,
        }
    }

    /// The guard of a lease granted, once as many replicas as asked have it;
    /// from here a dropped future drops the guard, which releases.
    async fn granted(&self, guard: LockGuard, started: Instant) -> Result<LockGuard, LockError> {
        let guard = if self.locker.config().replicas.is_some() {
            Box::pin(self.confirm_replicas(guard)).await?
        } else {
            guard
        };
        let token = guard.token();
        tracing::debug!(key = %self.keys.user(), %token, waited = ?started.elapsed(), "lock acquired");
        telemetry::acquired(self.keys.user(), started);
        Ok(guard)
    }

    /// The guard of a lease just granted, its watchdog scheduled: its
    /// deadline and renewals follow the ttl the store granted.
    fn hold(&self, taken: NewLease) -> LockGuard {
        let NewLease {
            owner,
            grant,
            front,
            sent,
        } = taken;
        let (token, ttl) = (grant.token, grant.ttl);
        let plan = watchdog::Plan {
            renew: self.watchdog,
            hold_until: self.locker.config().max_hold.map(|h| sent + h),
        };
        let locker = &self.locker;
        let lease = LeaseState::new(LeaseParts {
            backend: Arc::clone(locker.backend()),
            queues: Arc::clone(locker.plain_queues()),
            locker_id: locker.id(),
            keys: self.keys.clone(),
            kind: self.kind,
            owner,
            token,
            ttl,
            segment: grant.segment,
            deadline: deadline_after(sent, ttl),
            kept_until: self.hold_at_least.map(|hold| sent + hold),
            front,
        });
        self.locker
            .watchdogs()
            .start(Arc::clone(&lease), plan, sent, watchdog::interval(ttl));
        LockGuard::owner(lease)
    }

    fn timeout_error(&self, started: Instant, holder_expires_in: Option<Duration>) -> LockError {
        if self.skip_if_held {
            telemetry::skipped(self.keys.user());
        } else {
            telemetry::wait_timed_out(self.keys.user());
        }
        tracing::debug!(key = %self.keys.user(), waited = ?started.elapsed(), "lock wait timed out");
        LockError::WaitTimeout {
            key: LockError::shown(self.keys.user()),
            waited: started.elapsed(),
            holder_expires_in,
        }
    }

    /// Replica acknowledgement: on failure the lease is released and the
    /// acquire fails.
    async fn confirm_replicas(&self, guard: LockGuard) -> Result<LockGuard, LockError> {
        let Some((wanted, within)) = self.locker.config().replicas else {
            return Ok(guard);
        };
        let (backend, lease) = (&self.locker.backend(), &guard.lease);
        let owner = lease.owner.as_str();
        let confirmed = backend
            .confirm_replicas(&self.keys, self.kind, owner, lease.ttl, wanted, within)
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

/// The outcome of an acquisition as its caller gets it. Only a guard handed
/// over is kept after its release (`hold_at_least`): a failed or cancelled
/// acquire gives its lease back at once.
pub(crate) fn handed_over(result: Result<LockGuard, LockError>) -> Result<LockGuard, LockError> {
    if let Ok(guard) = &result {
        guard.lease.arm_keep();
    }
    result
}

impl FirstStep {
    /// Goes on to a guard or an error, waiting where it has to.
    pub(crate) async fn finish(self) -> Result<LockGuard, LockError> {
        handed_over(match self {
            FirstStep::Done(result) => result,
            FirstStep::Queue(acquisition) => acquisition.queue_up().await,
            FirstStep::Front(acquisition, head) => acquisition.contend(head).await,
        })
    }

    /// The `lock` tracing span of an acquisition that goes on.
    pub(crate) fn span(&self) -> tracing::Span {
        match self {
            FirstStep::Done(_) => tracing::Span::none(),
            FirstStep::Queue(acquisition) | FirstStep::Front(acquisition, _) => {
                let key = LockError::shown(acquisition.keys.user());
                tracing::debug_span!("lock", %key)
            }
        }
    }
}
