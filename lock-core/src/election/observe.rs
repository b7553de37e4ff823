//! [`Locker::observe`]: an election's changes of leader, as a stream.
//!
//! The observer subscribes to the key's release channel (or the store's
//! watch) before each read, so no change between a read and the wait is
//! missed. A leader that dies says nothing: the observer also looks again
//! when the lease it last saw would end, or within a second when nobody
//! leads (a new leader's announce may be late or lost). It never reads the
//! store more often than that unless told of a change.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use tokio::time::{Instant, sleep_until};

use crate::backend::ReleaseSignal;
use crate::backend::stored_keys::StoredKeys;
use crate::election::Leader;
use crate::error::{LockError, Operation};
use crate::kind::LockKind;
use crate::locker::Locker;
use crate::token::FencingToken;

/// Past the end of a lease the store reported, before the observer looks
/// again (the store's clock may run a little behind this host's).
const PAST_THE_LEASE: Duration = Duration::from_millis(10);

/// The longest the observer trusts "nobody leads" before it looks again.
const NOBODY_LEADS_AT_MOST: Duration = Duration::from_secs(1);

/// The least time before the observer looks again unless told of a change
/// (etcd reports time left in whole seconds: zero for the last one).
const AT_LEAST: Duration = Duration::from_millis(100);

/// The changes of leader of an election ([`Locker::observe`]): the leader
/// at first (`None` if nobody leads), then each new one in order, or
/// `None` when one ends with no successor yet.
///
/// A transient store error is not an item: the observer looks again
/// shortly. A permanent one (a refused subscription or read, a bad key)
/// is the last item.
///
/// ```
/// use futures_util::StreamExt;
/// use lock_core::{LockError, Locker};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), LockError> {
/// let locker = Locker::memory();
/// let mut changes = locker.observe("scheduler");
/// let leadership = locker.election("scheduler").value("node-a").await?;
/// while let Some(change) = changes.next().await {
///     if let Some(leader) = change? {
///         assert_eq!(leader.value.as_deref(), Some("node-a"));
///         break;
///     }
/// }
/// # leadership.resign().await
/// # }
/// ```
#[must_use = "streams do nothing unless polled"]
pub struct LeaderChanges {
    changes: Pin<Box<dyn Stream<Item = Result<Option<Leader>, LockError>> + Send>>,
}

impl Stream for LeaderChanges {
    type Item = Result<Option<Leader>, LockError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.changes.as_mut().poll_next(cx)
    }
}

impl std::fmt::Debug for LeaderChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderChanges").finish_non_exhaustive()
    }
}

/// What an observer keeps between two changes.
struct Observer {
    locker: Locker,
    keys: StoredKeys,
    signal: Option<ReleaseSignal>,
    /// The store has no channel (subscribing failed for good).
    no_channel: bool,
    /// The owner value and token of the leader last told (`Some(None)`:
    /// nobody).
    told: Option<Option<(String, FencingToken)>>,
    /// When to look again unless told of a change sooner.
    look_again: Option<Instant>,
}

impl Observer {
    async fn next_change(&mut self) -> Result<Option<Leader>, LockError> {
        loop {
            if let Some(at) = self.look_again.take() {
                self.wait(at).await;
            }
            self.subscribe().await?;
            let ttl = self.locker.default_ttl();
            let leader = match self.locker.leader_of(&self.keys).await {
                Ok(leader) => leader,
                Err(err) if err.is_transient() => {
                    tracing::debug!(key = %self.keys.user(), error = %err, "reading the leader failed; looking again");
                    self.look_again = Some(Instant::now() + (ttl / 3).min(Duration::from_secs(1)));
                    continue;
                }
                Err(err) => {
                    let key = self.keys.user();
                    return Err(LockError::from_store(key, Operation::Inspect, err));
                }
            };
            let left = match &leader {
                Some(leader) => leader.remaining.unwrap_or(ttl),
                // A leader's announce can be late or lost (a busy store,
                // a broken subscription): "nobody" is trusted only briefly.
                None => ttl.min(NOBODY_LEADS_AT_MOST),
            };
            self.look_again = Some(Instant::now() + (left + PAST_THE_LEASE).max(AT_LEAST));
            // On etcd a leader's token can rise once after it is first read
            // (see `Leader::token`): it is told again then.
            let term = leader.as_ref().map(|l| (l.owner.clone(), l.token));
            if self.told.as_ref() != Some(&term) {
                self.told = Some(term);
                return Ok(leader);
            }
        }
    }

    /// Subscribes to the key's changes unless subscribed (or the store has
    /// no channel).
    async fn subscribe(&mut self) -> Result<(), LockError> {
        if self.signal.is_some() || self.no_channel {
            return Ok(());
        }
        let backend = self.locker.backend();
        match backend
            .subscribe(&self.keys, LockKind::Exclusive, None)
            .await
        {
            Ok(signal) => self.signal = Some(signal),
            Err(err) if err.is_transient() => {
                tracing::debug!(key = %self.keys.user(), error = %err, "subscribing failed; trying again at the next look");
            }
            Err(err) if err.refusal().is_some() => {
                let key = self.keys.user();
                return Err(LockError::from_store(key, Operation::Subscribe, err));
            }
            Err(err) => {
                tracing::debug!(key = %self.keys.user(), error = %err, "no release channel; looking at each lease's end");
                self.no_channel = true;
            }
        }
        Ok(())
    }

    /// Until told of a change, or `at`.
    async fn wait(&mut self, at: Instant) {
        let Some(signal) = self.signal.as_mut() else {
            return sleep_until(at).await;
        };
        tokio::select! {
            open = signal.released() => if !open {
                self.signal = None;
            },
            () = sleep_until(at) => {}
        }
    }
}

impl Locker {
    /// The changes of leader of the election on `key`: the current leader
    /// first, then each change, woken by the store's release channel or
    /// watch and by the end of the leader's lease, never by polling faster
    /// than the lease; while nobody leads it looks again every second, so
    /// that a leader whose announce was late or lost is seen within one. A
    /// leader whose term is shorter than that, and whose announce is lost,
    /// may be missed; those seen come in order. Where waiters poll
    /// (PgBouncer without a `listen_url`), observers read as often; on etcd
    /// a waiting candidate's refresh of its entry is a change to read too.
    ///
    /// ```
    /// use futures_util::StreamExt;
    /// use lock_core::{LockError, Locker};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), LockError> {
    /// let locker = Locker::memory();
    /// let mut changes = locker.observe("scheduler");
    /// assert_eq!(changes.next().await.transpose()?, Some(None)); // nobody leads
    /// let leadership = locker.election("scheduler").value("node-a").await?;
    /// let leader = changes.next().await.transpose()?.flatten().expect("a leader");
    /// assert_eq!(leader.value.as_deref(), Some("node-a"));
    /// leadership.resign().await?;
    /// assert_eq!(changes.next().await.transpose()?, Some(None));
    /// # Ok(())
    /// # }
    /// ```
    pub fn observe(&self, key: impl AsRef<str>) -> LeaderChanges {
        let locker = self.clone();
        let first = StoredKeys::new(self.namespace(), key.as_ref()).map(|keys| Observer {
            locker,
            keys,
            signal: None,
            no_channel: false,
            told: None,
            look_again: None,
        });
        let changes = futures_util::stream::unfold(Some(first), |state| async move {
            let mut observer = match state? {
                Ok(observer) => observer,
                Err(err) => return Some((Err(err), None)),
            };
            match observer.next_change().await {
                Ok(change) => Some((Ok(change), Some(Ok(observer)))),
                Err(err) => Some((Err(err), None)),
            }
        });
        LeaderChanges {
            changes: Box::pin(changes),
        }
    }
}
