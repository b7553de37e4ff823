//! What the operators' calls answer with: the holders of a key
//! ([`Inspection`], [`Holder`]) and the glob that picks held keys
//! ([`Pattern`]). The calls themselves are in `operators.rs`.

use std::time::Duration;

use crate::kind::LockKind;
use crate::token::FencingToken;

/// Most keys [`Locker::held_keys`](crate::Locker::held_keys) returns.
pub const MAX_LISTED: usize = 10_000;

/// A pattern of user keys: `*` matches any run of characters, `?` one.
#[derive(Debug, Clone)]
pub struct Pattern(wildmatch::WildMatch);

impl Pattern {
    /// The pattern `pattern`.
    pub fn new(pattern: &str) -> Self {
        Pattern(wildmatch::WildMatch::new(pattern))
    }

    /// Whether `key` matches.
    pub fn matches(&self, key: &str) -> bool {
        self.0.matches(key)
    }
}

/// The user key and kind of a stored name of namespace `namespace`
/// (`<namespace>:{<escaped key>}:<kind>`), if it names one.
#[cfg_attr(
    not(any(
        feature = "redis",
        feature = "etcd",
        feature = "zookeeper",
        feature = "postgres"
    )),
    allow(dead_code)
)]
pub(crate) fn user_key_of(stored: &str, namespace: &str) -> Option<String> {
    let rest = stored.strip_prefix(namespace)?.strip_prefix(":{")?;
    let (escaped, kind) = rest.split_once('}')?;
    // etcd's entries follow the name: `<name>/<entry>`.
    let kind = kind.split('/').next()?;
    let holds = matches!(kind, ":lease" | ":fair" | ":rw" | ":permits" | ":segments");
    let user = percent_encoding::percent_decode_str(escaped)
        .decode_utf8()
        .ok()?;
    holds.then(|| user.into_owned())
}

/// What the store holds for one key, every kind of lock on it together.
///
/// ```
/// use lock_core::Locker;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), lock_core::LockError> {
/// let locker = Locker::builder().label("payments-7f9c").memory()?;
/// let guard = locker.lock("order:42").await?;
/// let seen = locker.inspect("order:42").await?;
/// let holder = &seen.holders[0];
/// assert_eq!(holder.token, guard.token());
/// assert_eq!(
///     holder.process(),
///     Some(format!("payments-7f9c/pid {}", std::process::id()))
/// );
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Inspection {
    /// The user key.
    pub key: String,
    /// Every live holder, of every kind of lock on the key.
    pub holders: Vec<Holder>,
    /// Who waits for the key, as far as the store can tell.
    pub waiters: Waiters,
}

impl Inspection {
    /// Nothing held and no queue entry.
    pub fn new(key: impl Into<String>) -> Self {
        Inspection {
            key: key.into(),
            holders: Vec::new(),
            waiters: Waiters::default(),
        }
    }

    /// Whether anyone holds the key.
    pub fn is_held(&self) -> bool {
        !self.holders.is_empty()
    }
}

/// Who waits for a key, as far as its store can tell: the waiters it keeps
/// an entry for, in line, and what it knows of those it keeps none for.
///
/// On etcd and ZooKeeper every waiter has an entry. Elsewhere a fair
/// queue's waiters and a waiting writer have one, while a plain lock's
/// waiters wait on a wake-up (pub/sub, `LISTEN`, a process-local queue) and
/// leave none: a count of 0 there does not mean that no one waits.
///
/// ```
/// use lock_core::{Unlisted, Waiters};
///
/// let seen = Waiters::default();
/// assert_eq!(seen.queued, 0);
/// assert_eq!(seen.unlisted, Unlisted::Unknown);
/// assert_eq!(seen.to_string(), "0 queued; others not listed by this store");
/// assert_eq!(Waiters::all_listed(3).to_string(), "3");
/// ```
///
/// A fair lock's queue, read by an operator:
///
/// ```
/// use std::time::Duration;
/// use lock_core::{LockKind, Locker};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), lock_core::LockError> {
/// let locker = Locker::builder().label("billing-3").memory()?;
/// let held = locker.fair_lock("ledger").await?;
/// let waiting = tokio::spawn({
///     let locker = locker.clone();
///     async move { locker.fair_lock("ledger").wait(Duration::from_secs(5)).await }
/// });
/// let queue = loop {
///     let seen = locker.inspect("ledger").await?;
///     if !seen.waiters.queue.is_empty() {
///         break seen.waiters.queue;
///     }
///     tokio::task::yield_now().await;
/// };
/// assert_eq!(queue[0].kind, LockKind::Fair);
/// assert_eq!(queue[0].process(), Some(format!("billing-3/pid {}", std::process::id())));
/// held.release().await?;
/// waiting.await.unwrap()?.release().await
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Waiters {
    /// Waiters with an entry in the store: fair-queue entries, a waiting
    /// writer's mark, every waiter on etcd and ZooKeeper.
    pub queued: usize,
    /// The queued waiters whose entry names them, each kind's in the order
    /// they will be granted (the kinds one after the other).
    pub queue: Vec<Waiter>,
    /// What the store knows of the waiters it keeps no entry for.
    pub unlisted: Unlisted,
}

impl Waiters {
    /// `queued` waiters, and whatever the store knows of the others.
    pub fn new(queued: usize, unlisted: Unlisted) -> Self {
        Waiters {
            queued,
            queue: Vec::new(),
            unlisted,
        }
    }

    /// `queued` waiters, and no others: the store keeps an entry for every
    /// waiter.
    pub fn all_listed(queued: usize) -> Self {
        Waiters::new(queued, Unlisted::None)
    }
}

impl std::fmt::Display for Waiters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.unlisted {
            Unlisted::None => write!(f, "{}", self.queued),
            Unlisted::Unknown => {
                write!(f, "{} queued; others not listed by this store", self.queued)
            }
            Unlisted::SomeoneWaited => write!(
                f,
                "{} queued; others not listed by this store, and someone has waited",
                self.queued
            ),
        }
    }
}

/// One waiter with an entry in the store (see [`Waiters::queue`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Waiter {
    /// The kind of lock it waits for.
    pub kind: LockKind,
    /// Its owner value: one per acquisition (see [`process`](Self::process)).
    pub owner: String,
}

impl Waiter {
    /// A waiter for `kind` by `owner`.
    pub fn new(kind: LockKind, owner: impl Into<String>) -> Self {
        Waiter {
            kind,
            owner: owner.into(),
        }
    }

    /// The process that waits, `<label>/pid <pid>`; `None` for an owner
    /// value lock-core did not make.
    pub fn process(&self) -> Option<String> {
        crate::owner::process_of(&self.owner)
    }
}

/// What a store knows of the waiters it keeps no entry for (see
/// [`Waiters`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unlisted {
    /// There are none: every waiter has an entry (etcd, ZooKeeper).
    None,
    /// Whether any wait is not known: they leave nothing in the store.
    #[default]
    Unknown,
    /// Someone has waited for the current holder: a waiter left a mark on
    /// its lease (a plain lock on Redis, PostgreSQL and MySQL), though not
    /// who, nor how many.
    SomeoneWaited,
}

/// What [`Locker::force_release`](crate::Locker::force_release) removed.
///
/// ```
/// use lock_core::Locker;
/// use lock_core::backend::MemoryBackend;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), lock_core::LockError> {
/// // Two processes' Lockers on one store.
/// let store = MemoryBackend::new();
/// let wedged = Locker::builder().backend(store.clone())?;
/// let operator = Locker::builder().backend(store)?;
/// let stuck = wedged.lock("order:42").await?;
/// let forced = operator.force_release("order:42").await?;
/// assert_eq!(forced.removed, 1);
/// assert_eq!(forced.tokens_up_to, Some(stuck.token()));
/// // Granted after it: a higher token, and kept.
/// let next = operator.lock("order:42").await?;
/// assert!(Some(next.token()) > forced.tokens_up_to);
/// # next.release().await
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ForceReleased {
    /// The holders and queue entries removed.
    pub removed: usize,
    /// A token at least as high as every removed holder's, and below the
    /// token of every grant of the key after the force-release (`None`
    /// when nothing was removed): a holder with a higher token was granted
    /// after it, and keeps its grant.
    pub tokens_up_to: Option<FencingToken>,
}

impl ForceReleased {
    /// `removed` entries, the highest token among them `tokens_up_to` (none
    /// if it is 0 or nothing was removed).
    pub fn new(removed: usize, tokens_up_to: Option<FencingToken>) -> Self {
        ForceReleased {
            removed,
            // Queue entries alone carry no token.
            tokens_up_to: tokens_up_to.filter(|token| removed > 0 && token.get() > 0),
        }
    }
}

/// One holder of a key, as the store records it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The kind of lock held.
    pub kind: LockKind,
    /// The owner value: one per acquisition (see [`process`](Self::process)).
    pub owner: String,
    /// The fencing token of the acquisition.
    pub token: FencingToken,
    /// Time left on the lease unless renewed, where the store says.
    pub remaining: Option<Duration>,
    /// Time since the lock was granted, where the store says.
    pub age: Option<Duration>,
    /// The segment held, for a striped lock.
    pub segment: Option<u32>,
}

impl Holder {
    /// A holder of `kind` by `owner` with `token`.
    pub fn new(kind: LockKind, owner: impl Into<String>, token: FencingToken) -> Self {
        Holder {
            kind,
            owner: owner.into(),
            token,
            remaining: None,
            age: None,
            segment: None,
        }
    }

    /// With the time left on its lease.
    pub fn remaining(mut self, remaining: Duration) -> Self {
        self.remaining = Some(remaining);
        self
    }

    /// With the time since its grant.
    pub fn age(mut self, age: Duration) -> Self {
        self.age = Some(age);
        self
    }

    /// With the segment it holds.
    pub fn segment(mut self, segment: u32) -> Self {
        self.segment = Some(segment);
        self
    }

    /// The process that holds it, `<label>/pid <pid>` (see
    /// [`LockerBuilder::label`](crate::LockerBuilder::label)); `None` for an
    /// owner value lock-core did not make.
    pub fn process(&self) -> Option<String> {
        crate::owner::process_of(&self.owner)
    }
}
