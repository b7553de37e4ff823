//! The multi-lock: [`Locker::lock_all`] holds every key of a set or none.
//!
//! Keys are taken one by one in one canonical order (sorted, duplicates
//! collapsed), so two tasks locking `{a, b}` and `{b, a}` never hold one
//! key each while waiting for the other. (Order cannot help a task that
//! already holds one of the keys before it calls: that is ordinary lock
//! nesting, bounded by `wait`.) Each key is a plain lease with
//! its own watchdog and token; a failure on any key releases those already
//! taken.

use std::collections::BTreeSet;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::future::{join_all, select_all};
use tokio::time::Instant;

use crate::backend::stored_keys::StoredKeys;
use crate::error::LockError;
use crate::error::LossReason;
use crate::guard::LockGuard;
use crate::lease::Status;
use crate::locker::Locker;
use crate::options::LockOptions;
use crate::scope;
use crate::token::FencingToken;

/// A request for every key of a set, made by [`Locker::lock_all`]; set
/// options, then `.await` it. The options apply to each key; `wait` bounds
/// the whole acquisition.
///
/// ```
/// use lock_core::{LockError, Locker};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), LockError> {
/// let locker = Locker::memory();
/// // A transfer locks both accounts, in whatever order they are named.
/// let both = locker
///     .lock_all(["account:9", "account:4", "account:9"])
///     .wait(Duration::from_secs(2))
///     .await?;
/// assert_eq!(both.keys().collect::<Vec<_>>(), ["account:4", "account:9"]);
/// let _token = both.token_of("account:9").expect("held");
/// both.release().await
/// # }
/// ```
///
/// # Cancel safety
/// Dropping the future at any await point never leaves a lock held: the
/// keys taken so far are released as dropped guards are, and the key being
/// taken is undone as a dropped [`LockRequest`](crate::LockRequest) is.
#[must_use = "a LockAllRequest does nothing until awaited"]
#[derive(Debug)]
pub struct LockAllRequest {
    locker: Locker,
    /// The keys in canonical order, or the first bad key's error.
    keys: Result<Vec<String>, LockError>,
    options: LockOptions,
}

impl LockAllRequest {
    pub(crate) fn new<K: AsRef<str>>(locker: Locker, keys: impl IntoIterator<Item = K>) -> Self {
        let config = &locker.config();
        let canonical: BTreeSet<String> = keys.into_iter().map(|k| k.as_ref().to_owned()).collect();
        let keys = match canonical.first() {
            None => Err(LockError::InvalidKey {
                key: String::new(),
                reason: "lock_all needs at least one key".into(),
            }),
            // Every key is checked before any store round trip.
            Some(_) => canonical
                .iter()
                .try_for_each(|key| StoredKeys::new(&config.namespace, key).map(drop))
                .map(|()| canonical.into_iter().collect()),
        };
        LockAllRequest {
            options: LockOptions::default(),
            keys,
            locker,
        }
    }

    /// Lease length of each key (at least 30 ms).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.options.ttl = Some(ttl);
        self
    }

    /// How long to wait for all the keys together before
    /// [`LockError::WaitTimeout`] (naming the key that was not had, and
    /// how long that key was waited for); zero tries each once.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.options.wait = Some(wait);
        self
    }

    /// Whether each lease is renewed while the guard lives.
    pub fn watchdog(mut self, watchdog: bool) -> Self {
        self.options.watchdog = Some(watchdog);
        self
    }

    /// The options `options` sets, over those set before.
    pub fn options(mut self, options: LockOptions) -> Self {
        self.options = options.over(self.options);
        self
    }

    async fn acquire(self) -> Result<MultiGuard, LockError> {
        let keys = self.keys?;
        if self.options.hold_at_least.is_some() {
            let why = "keeps the lock of one key; lock_all gives every key back at release";
            return Err(LockError::invalid_config("hold_at_least", why));
        }
        // `None`: a wait too long to add to the clock, i.e. for ever.
        let settings = self.options.settled(self.locker.config());
        let deadline = Instant::now().checked_add(settings.wait);
        let mut guards = Vec::with_capacity(keys.len());
        for key in &keys {
            let taken = self
                .locker
                .lock(key)
                .ttl(settings.ttl)
                .wait(deadline.map_or(settings.wait, |d| {
                    d.saturating_duration_since(Instant::now())
                }))
                .watchdog(settings.watchdog)
                .await;
            match taken {
                Ok(guard) => guards.push(guard),
                Err(err) => {
                    release_all(guards).await.ok();
                    return Err(err);
                }
            }
        }
        // A lease lost while a later key was awaited: all or none.
        if let Some(lost) = guards.iter().find(|guard| !guard.is_held()) {
            let reason = match lost.lease.status() {
                Status::Lost(reason) => reason,
                _ => LossReason::NotRenewedInTime,
            };
            let err = lost.lease.lost_error(reason);
            release_all(guards).await.ok();
            return Err(err);
        }
        Ok(MultiGuard { guards })
    }
}

impl IntoFuture for LockAllRequest {
    type Output = Result<MultiGuard, LockError>;
    type IntoFuture = LockAllFuture;

    fn into_future(self) -> LockAllFuture {
        LockAllFuture(Box::pin(self.acquire()))
    }
}

/// The future of a [`LockAllRequest`], which `.await` runs. Cancel safe as
/// [`LockAllRequest`] says.
#[must_use = "a LockAllFuture does nothing until awaited"]
pub struct LockAllFuture(Pin<Box<dyn Future<Output = Result<MultiGuard, LockError>> + Send>>);

impl Future for LockAllFuture {
    type Output = Result<MultiGuard, LockError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

impl fmt::Debug for LockAllFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockAllFuture").finish_non_exhaustive()
    }
}

/// Every key of a [`Locker::lock_all`] set, held: one lease per key, each
/// with its own watchdog and token. Dropping it releases every key, as
/// dropping a [`LockGuard`] does (a key the task already held in an
/// enclosing scope stays with that scope's guard).
#[must_use = "dropping a MultiGuard releases its locks at once"]
pub struct MultiGuard {
    /// In canonical (sorted) key order.
    guards: Vec<LockGuard>,
}

impl MultiGuard {
    /// The keys held, sorted, without duplicates.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.guards.iter().map(LockGuard::key)
    }

    /// Each key with the fencing token minted for it, in key order.
    pub fn tokens(&self) -> impl ExactSizeIterator<Item = (&str, FencingToken)> + '_ {
        self.guards.iter().map(|guard| (guard.key(), guard.token()))
    }

    /// The token of `key`, or `None` if `key` is not in the set.
    pub fn token_of(&self, key: impl AsRef<str>) -> Option<FencingToken> {
        let key = key.as_ref();
        let at = self.guards.binary_search_by(|g| g.key().cmp(key)).ok()?;
        Some(self.guards[at].token())
    }

    /// Whether every lease is still held (see [`LockGuard::is_held`]).
    pub fn is_held(&self) -> bool {
        self.guards.iter().all(LockGuard::is_held)
    }

    /// Time left until the first local deadline, unless renewed before.
    pub fn expires_in(&self) -> Duration {
        let first = self.guards.iter().map(LockGuard::expires_in).min();
        first.unwrap_or_default()
    }

    /// A future that resolves with [`LockError::Lost`] (naming the key)
    /// when any one of the leases is lost. It never resolves if they are
    /// released.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub fn lost(&self) -> impl Future<Output = LockError> + Send + 'static {
        let each: Vec<_> = self.guards.iter().map(|g| Box::pin(g.lost())).collect();
        async move { select_all(each).await.0 }
    }

    /// Runs `body` as the holder of every key: inside it,
    /// [`FencingToken::current_for`] gives each key's token, and acquiring
    /// any of the keys through the same Locker is reentrant.
    ///
    /// ```
    /// use lock_core::{FencingToken, Locker};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), lock_core::LockError> {
    /// let locker = Locker::memory();
    /// let both = locker.lock_all(["account:1", "account:2"]).await?;
    /// both.scope(async {
    ///     assert_eq!(FencingToken::current_for("account:2"), both.token_of("account:2"));
    /// }).await;
    /// both.release().await
    /// # }
    /// ```
    pub fn scope<F: Future>(&self, body: F) -> crate::Scoped<F> {
        let leases: Arc<[_]> = self.guards.iter().map(|g| Arc::clone(&g.lease)).collect();
        scope::enter_all(leases, body)
    }

    /// Releases every key (at once, not one after another). Returns the
    /// first key's error if any lease had been lost or a release could not
    /// get through (it then goes on in the background, as
    /// [`LockGuard::release`] says); every key is released either way.
    ///
    /// # Cancel safety
    /// If the returned future is dropped before it completes, the keys not
    /// yet released are released in the background.
    pub async fn release(self) -> Result<(), LockError> {
        release_all(self.guards).await
    }
}

async fn release_all(guards: Vec<LockGuard>) -> Result<(), LockError> {
    let outcomes = join_all(guards.into_iter().map(LockGuard::release)).await;
    outcomes.into_iter().collect()
}

impl fmt::Debug for MultiGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiGuard")
            .field("tokens", &self.tokens().collect::<Vec<_>>())
            .field("held", &self.is_held())
            .finish()
    }
}

impl Locker {
    /// A request for every key of `keys`, held together or not at all:
    /// set options on the returned [`LockAllRequest`], then `.await` it
    /// for a [`MultiGuard`](crate::MultiGuard).
    ///
    /// Keys are taken in one canonical order (sorted; duplicates collapse),
    /// so tasks naming the same keys in different orders never deadlock
    /// (as long as neither already holds one of them when it calls).
    /// An empty set is [`LockError::InvalidKey`], as is any bad key, before
    /// any store round trip.
    pub fn lock_all<K: AsRef<str>>(&self, keys: impl IntoIterator<Item = K>) -> LockAllRequest {
        LockAllRequest::new(self.clone(), keys)
    }
}
