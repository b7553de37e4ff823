//! [`RedLockBackend`]: one lock over N independent Redis masters, with
//! fencing tokens that keep rising whatever the masters' clocks say.
//!
//! A lease is asked of every master at once, each request bounded well
//! under the ttl (a tenth of it, at most the Locker's timeout), and granted
//! when a majority (N/2 + 1) took it. The grant has two phases: the tokens
//! of the quorum are read, and the lease's token is raised to their
//! maximum plus one on the quorum before the guard gets it. Any two quorums
//! share a master, and that master then mints every later token above it,
//! so tokens strictly increase per key even when one master's clock runs
//! ahead. (Taking the highest token of the quorum alone is not enough: a
//! later quorum without the master whose clock ran ahead would mint lower
//! ones.)
//!
//! The lease is valid for the ttl less the time the acquisition took and
//! the drift: the guard's local deadline counts from before the first
//! request. Renewals and the loss signal need the quorum too. A release
//! goes to every master, also to those that timed out or answered that
//! another owner held the lock (and again, in the background, to those it
//! did not reach). Without a quorum, the leases taken are given back at
//! once; after a split vote (some masters granted it, too few) the next
//! try waits a random delay, so that contenders do not meet again.
//!
//! Only the plain lock (and [`lock_all`](crate::Locker::lock_all) over it)
//! runs on RedLock; the other kinds are [`LockError::Unsupported`](crate::LockError::Unsupported).

mod any_release;
mod inspect;
mod master;
mod release_retry;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::time::Duration;

use futures_util::future::join_all;
use tokio::sync::OnceCell;

use self::any_release::any_of;
use self::master::Master;
use crate::backend::redis::bounded;
use crate::backend::stored_keys::StoredKeys;
use crate::backend::{
    Attempt, Grant, LockStore, Pattern, RedisBackend, ReleaseSignal, StoreFuture,
};
use crate::error::{Applied, Refusal, StoreError};
use crate::inspect::{ForceReleased, Inspection};
use crate::kind::LockKind;
use crate::token::FencingToken;

/// Fewer independent masters give no fault tolerance.
const MIN_MASTERS: usize = 3;

/// Bound on the random wait after a split vote.
const SPLIT_VOTE_DELAY: Duration = Duration::from_millis(100);

/// The least bound on one request to one master (a script call can take
/// two round trips: EVALSHA, then EVAL on a server that lacks the script).
const MIN_BOUND: Duration = Duration::from_millis(50);

/// Most releases sent again in the background at once (see
/// [`RedLockBackend::release_later`]).
const MAX_RELEASES_LATER: usize = 1024;

/// Bound on subscribing on one master (waiting goes on without it).
const SUBSCRIBE_BOUND: Duration = Duration::from_millis(500);

/// Leases held by a majority of independent Redis masters (see the module
/// documentation).
///
/// ```no_run
/// # async fn run() -> Result<(), lock_core::LockError> {
/// let masters = [
///     "redis://10.0.0.1:6379",
///     "redis://10.0.0.2:6379",
///     "redis://10.0.0.3:6379",
///     "redis://10.0.0.4:6379",
///     "redis://10.0.0.5:6379",
/// ];
/// let locker = lock_core::Locker::builder().redlock(&masters).await?;
/// let guard = locker.lock("order:42").await?;
/// # guard.release().await
/// # }
/// ```
pub struct RedLockBackend {
    masters: Vec<Arc<Master>>,
    quorum: usize,
    timeout: Duration,
    /// The longest ttl asked for so far, in ms: no lease outlives it.
    longest_ttl: AtomicU64,
    /// Releases being sent again in the background.
    releases_later: Arc<AtomicUsize>,
}

impl std::fmt::Debug for RedLockBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedLockBackend")
            .field("store", &crate::backend::LockStore::describe(self))
            .finish_non_exhaustive()
    }
}

impl RedLockBackend {
    /// Connects to the masters at `urls` (independent servers, not
    /// replicas of each other), bounding connects and each request by
    /// `timeout`. A master that cannot be reached now is tried again on
    /// later requests, but a quorum must answer now.
    ///
    /// Fewer than 3 URLs, or one this build cannot connect to, is a
    /// refusal naming it.
    pub async fn connect(urls: &[&str], timeout: Duration) -> Result<Self, StoreError> {
        if urls.len() < MIN_MASTERS {
            let reason = format!(
                "RedLock needs at least {MIN_MASTERS} independent masters, {} given",
                urls.len()
            );
            return Err(StoreError::refused(Refusal::InvalidUrl, reason));
        }
        let masters: Vec<Arc<Master>> = urls
            .iter()
            .map(|url| {
                Arc::new(Master {
                    url: (*url).to_owned(),
                    backend: OnceCell::new(),
                })
            })
            .collect();
        let backend = RedLockBackend {
            quorum: masters.len() / 2 + 1,
            masters,
            timeout,
            longest_ttl: AtomicU64::new(0),
            releases_later: Arc::default(),
        };
        let connected = join_all(backend.masters.iter().map(|m| m.get(timeout))).await;
        let mut reached = 0;
        let mut failure = None;
        for (master, outcome) in backend.masters.iter().zip(connected) {
            match outcome {
                Ok(_) => reached += 1,
                // What no retry fixes is an error now, naming the master.
                Err(err) if err.refusal().is_some() => return Err(err),
                Err(err) => {
                    tracing::warn!(master = %master.url, error = %err, "RedLock master unreachable; trying again on later requests");
                    failure = Some(err);
                }
            }
        }
        match failure {
            Some(err) if reached < backend.quorum => Err(err),
            _ => Ok(backend),
        }
    }

    /// How many masters make a majority.
    pub fn quorum(&self) -> usize {
        self.quorum
    }

    /// The bound on one request to one master for a lease of `ttl`.
    fn bound(&self, ttl: Duration) -> Duration {
        (ttl / 10).max(MIN_BOUND).min(self.timeout)
    }

    /// Whether `failures` leave fewer masters than a quorum.
    fn too_many(&self, failures: usize) -> bool {
        failures > self.masters.len() - self.quorum
    }

    /// `request` sent to each of `masters` at once, each bounded by `bound`
    /// (connecting a master that was down counts in the bound).
    async fn on_masters<'a, T, Fut>(
        &'a self,
        masters: impl IntoIterator<Item = &'a Arc<Master>>,
        bound: Duration,
        request: impl Fn(&'a RedisBackend) -> Fut,
    ) -> Vec<Result<T, StoreError>>
    where
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let request = &request;
        join_all(masters.into_iter().map(|master| {
            bounded(bound, async move {
                let backend = master.get(self.timeout).await?;
                request(backend).await
            })
        }))
        .await
    }

    /// The error of a request that fewer masters than a quorum answered:
    /// a master's refusal of this client if there is one (no retry fixes
    /// it), else a transient error.
    fn no_quorum(&self, what: &str, failures: Vec<StoreError>) -> StoreError {
        if let Some(refused) = failures.iter().find(|f| f.refusal().is_some()) {
            return refused.clone();
        }
        let unknown = failures.iter().any(StoreError::outcome_unknown);
        let first = failures
            .first()
            .map_or_else(String::new, ToString::to_string);
        let reason = format!(
            "{what} reached {} of {} masters (a quorum is {}): {first}",
            self.masters.len() - failures.len(),
            self.masters.len(),
            self.quorum
        );
        StoreError::transient(reason, Applied::maybe_if(unknown))
    }

    /// Gives `owner`'s lease back on every master, whatever each answered
    /// before; failures are left to the lease's expiry. (Not sent again
    /// later: the next try asks with the same owner value, and a late
    /// give-back would undo the lease it takes.)
    async fn give_back<'a>(&'a self, keys: &'a StoredKeys, owner: &'a str, bound: Duration) {
        let release = |backend: &'a RedisBackend| {
            LockStore::release(backend, keys, LockKind::Exclusive, owner)
        };
        let _ = self.on_masters(&self.masters, bound, release).await;
    }
}

/// A random wait below `bound` and [`SPLIT_VOTE_DELAY`].
fn split_vote_delay(bound: Duration) -> Duration {
    bound.min(SPLIT_VOTE_DELAY).mul_f64(fastrand::f64())
}

impl LockStore for RedLockBackend {
    fn acquire<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<Attempt, StoreError>> {
        StoreFuture::new(async move {
            self.asked_for(ttl);
            let bound = self.bound(ttl);
            let acquire = |backend: &'a RedisBackend| backend.acquire(keys, kind, owner, ttl);
            let answers = self.on_masters(&self.masters, bound, acquire).await;
            let (mut granted, mut held, mut failures) = (Vec::new(), Vec::new(), Vec::new());
            for (master, answer) in self.masters.iter().zip(answers) {
                match answer {
                    Ok(Attempt::Acquired(grant)) => granted.push((master, grant.token)),
                    Ok(Attempt::Held { remaining }) => held.push(remaining),
                    Ok(_) => held.push(None),
                    Err(err) => failures.push(err),
                }
            }
            if granted.len() >= self.quorum {
                // Second phase: the quorum's highest token plus one, on the quorum.
                let top = granted.iter().map(|(_, t)| t.get()).max().unwrap_or(0);
                let token = FencingToken::new(top.saturating_add(1));
                let quorum = granted.iter().map(|(master, _)| *master);
                let raise = |backend: &'a RedisBackend| backend.raise_token(keys, owner, token);
                let raised = self.on_masters(quorum, bound, raise).await;
                if raised.iter().filter(|r| matches!(r, Ok(true))).count() >= self.quorum {
                    return Ok(Attempt::Acquired(Grant::new(token, ttl)));
                }
            }
            // No quorum: what was taken goes back, everywhere.
            self.give_back(keys, owner, bound).await;
            if self.too_many(failures.len()) {
                return Err(self.no_quorum("the acquire", failures));
            }
            if !granted.is_empty() && held.len() < self.quorum {
                // A split vote: contenders try again after random waits
                // (here: the give-backs above wake every waiter at once).
                tokio::time::sleep(split_vote_delay(bound)).await;
                return Ok(Attempt::Held {
                    remaining: Some(Duration::ZERO),
                });
            }
            // Free once a quorum of the other owner's leases has run out.
            let mut remaining: Vec<Duration> = held.iter().flatten().copied().collect();
            remaining.sort();
            Ok(Attempt::Held {
                remaining: remaining.get(self.quorum.saturating_sub(1)).copied(),
            })
        })
    }

    fn renew<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        StoreFuture::new(async move {
            self.asked_for(ttl);
            let renew =
                |backend: &'a RedisBackend| LockStore::renew(backend, keys, kind, owner, ttl);
            let answers = self.on_masters(&self.masters, self.bound(ttl), renew).await;
            self.quorum_says("the renewal", answers)
        })
    }

    fn release<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        StoreFuture::new(async move {
            let release =
                |backend: &'a RedisBackend| LockStore::release(backend, keys, kind, owner);
            let answers = self.on_masters(&self.masters, self.timeout, release).await;
            let failures: Vec<bool> = answers.iter().map(|a| a.is_err()).collect();
            let said = self.quorum_says("the release", answers);
            // Without a quorum the caller sends the release again itself, to
            // every master: only a release that stands is followed up here.
            if said.is_ok() {
                self.release_later(&failures, keys, kind, owner);
            }
            said
        })
    }

    /// Releases are published on every master where a waiter found the
    /// lease: every master that answers is listened to, and the first
    /// release heard on any of them wakes the waiter.
    fn subscribe<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        queued_owner: Option<&'a str>,
    ) -> StoreFuture<'a, Result<ReleaseSignal, StoreError>> {
        StoreFuture::new(async move {
            let bound = SUBSCRIBE_BOUND.min(self.timeout);
            let subscribe =
                |backend: &'a RedisBackend| LockStore::subscribe(backend, keys, kind, queued_owner);
            let subscriptions = self.on_masters(&self.masters, bound, subscribe).await;
            let mut signals = Vec::new();
            let mut failure = None;
            for subscribed in subscriptions {
                match subscribed {
                    Ok(signal) => signals.push(signal),
                    Err(err) => failure = Some(err),
                }
            }
            match failure {
                Some(err) if signals.is_empty() => Err(err),
                _ => Ok(any_of(signals)),
            }
        })
    }

    /// On every master: an observer subscribes on each.
    fn announce<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
    ) -> StoreFuture<'a, Result<(), StoreError>> {
        StoreFuture::new(async move {
            let bound = SUBSCRIBE_BOUND.min(self.timeout);
            let announce = |backend: &'a RedisBackend| LockStore::announce(backend, keys, kind);
            let told = self.on_masters(&self.masters, bound, announce).await;
            let mut failure = None;
            for outcome in told {
                match outcome {
                    Ok(()) => return Ok(()),
                    Err(err) => failure = Some(err),
                }
            }
            failure.map_or(Ok(()), Err)
        })
    }

    fn inspect<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> StoreFuture<'a, Result<Inspection, StoreError>> {
        StoreFuture::new(self.inspection_of(keys))
    }

    fn held_keys<'a>(
        &'a self,
        namespace: &'a str,
        pattern: &'a Pattern,
    ) -> StoreFuture<'a, Result<Vec<String>, StoreError>> {
        StoreFuture::new(self.held_keys_matching(namespace, pattern))
    }

    fn force_release<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> StoreFuture<'a, Result<ForceReleased, StoreError>> {
        StoreFuture::new(self.force_release_all(keys))
    }

    fn describe(&self) -> String {
        format!(
            "redlock over {} masters (quorum {})",
            self.masters.len(),
            self.quorum
        )
    }
}

impl RedLockBackend {
    /// `true` when a quorum said yes, `false` when too many said no for a
    /// quorum to, else an error (too many did not answer).
    fn quorum_says(
        &self,
        what: &str,
        answers: Vec<Result<bool, StoreError>>,
    ) -> Result<bool, StoreError> {
        let (mut yes, mut no, mut failures) = (0, 0, Vec::new());
        for answer in answers {
            match answer {
                Ok(true) => yes += 1,
                Ok(false) => no += 1,
                Err(err) => failures.push(err),
            }
        }
        if yes >= self.quorum {
            Ok(true)
        } else if self.too_many(no) {
            Ok(false)
        } else {
            Err(self.no_quorum(what, failures))
        }
    }
}
