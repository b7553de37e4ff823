//! Who waits for a key, as an inspection tells it: the waiters a store
//! keeps an entry for, in line ([`Waiters`], [`Waiter`]), and what it knows
//! of the others ([`Unlisted`]).

use crate::kind::LockKind;

/// Most waiters [`Waiters::queue`] lists (the first in line); `queued`
/// counts them all.
pub const MAX_LISTED_WAITERS: usize = 100;

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
    /// they will be granted (the kinds one after the other); the first
    /// [`MAX_LISTED_WAITERS`].
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

    /// Counts `waiter`, next in line, and lists it while fewer than
    /// [`MAX_LISTED_WAITERS`] are.
    pub(crate) fn line_up(&mut self, waiter: Waiter) {
        self.queued += 1;
        if self.queue.len() < MAX_LISTED_WAITERS {
            self.queue.push(waiter);
        }
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

    /// The waiting Locker's [`label`](crate::LockerBuilder::label); `None`
    /// for an owner value lock-core did not make.
    pub fn label(&self) -> Option<&str> {
        crate::owner::label_of(&self.owner)
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
