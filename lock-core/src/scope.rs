//! Task-scoped reentrancy and `FencingToken::current()`.
//!
//! A locked scope records its lease in a task-local frame that points at
//! the enclosing one. A nested acquire of the same key through the same
//! Locker inside the scope is granted at once with the same token; only the
//! outer guard releases. Other tasks - also tasks spawned from inside the
//! scope - are other holders.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use pin_project::pin_project;
use tokio::task::futures::TaskLocalFuture;

use crate::kind::LockKind;
use crate::lease::{Lease, LeaseState};
use crate::token::FencingToken;

tokio::task_local! {
    static HELD: Frame;
}

#[derive(Clone)]
struct Frame {
    held: Held,
    parent: Option<Arc<Frame>>,
}

/// What one scope holds.
#[derive(Clone)]
enum Held {
    /// A [`LockGuard`](crate::LockGuard)'s lease.
    One(Arc<LeaseState>),
    /// A [`MultiGuard`](crate::MultiGuard)'s leases.
    Many(Arc<[Arc<LeaseState>]>),
}

impl Held {
    fn leases(&self) -> &[Arc<LeaseState>] {
        match self {
            Held::One(lease) => std::slice::from_ref(lease),
            Held::Many(leases) => leases,
        }
    }
}

/// A future run as the holder of a lock, made by
/// [`LockGuard::scope`](crate::LockGuard::scope): while it is polled,
/// [`FencingToken::current`] returns the lock's token and acquiring the
/// same key through the same Locker is reentrant.
#[pin_project]
#[must_use = "futures do nothing unless awaited"]
pub struct Scoped<F> {
    #[pin]
    inner: TaskLocalFuture<Frame, F>,
}

impl<F: Future> Future for Scoped<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.project().inner.poll(cx)
    }
}

impl<F> std::fmt::Debug for Scoped<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scoped").finish_non_exhaustive()
    }
}

/// Runs `body` with `lease` as the innermost lock of the task.
pub(crate) fn enter<F: Future>(lease: Arc<LeaseState>, body: F) -> Scoped<F> {
    enter_frame(Held::One(lease), body)
}

/// Runs `body` with `leases` as the innermost locks of the task.
pub(crate) fn enter_all<F: Future>(leases: Arc<[Arc<LeaseState>]>, body: F) -> Scoped<F> {
    enter_frame(Held::Many(leases), body)
}

fn enter_frame<F: Future>(held: Held, body: F) -> Scoped<F> {
    let parent = HELD.try_with(|frame| Arc::new(frame.clone())).ok();
    Scoped {
        inner: HELD.scope(Frame { held, parent }, body),
    }
}

/// The token of the innermost scope's lock; `None` if it holds several.
pub(crate) fn innermost_token() -> Option<FencingToken> {
    innermost_lease().map(|lease| lease.token)
}

/// The lease of the innermost scope's lock; `None` if it holds several.
pub(crate) fn innermost_lease() -> Option<Arc<LeaseState>> {
    HELD.try_with(|frame| match frame.held.leases() {
        [lease] => Some(Arc::clone(lease)),
        _ => None,
    })
    .ok()
    .flatten()
}

/// The token of the innermost scope's lease on user key `key`, through
/// whichever Locker it was taken.
pub(crate) fn token_for(key: &str) -> Option<FencingToken> {
    find(|lease| lease.keys.user() == key).map(|lease| lease.token)
}

/// The innermost lease of one of `kinds` this task's scopes hold on
/// `lease_key` through Locker `locker_id`, if any (each kind of lock on a
/// key is a lock of its own).
pub(crate) fn held_by_task(
    locker_id: u64,
    lease_key: &str,
    kinds: &[LockKind],
) -> Option<Arc<LeaseState>> {
    find(|lease| {
        lease.locker_id == locker_id
            && kinds.contains(&lease.kind)
            && lease.keys.lease() == lease_key
    })
}

/// The innermost lease of this task's scopes that `matches`.
fn find(matches: impl Fn(&LeaseState) -> bool) -> Option<Arc<LeaseState>> {
    HELD.try_with(|frame| {
        let mut current = Some(frame);
        while let Some(frame) = current {
            if let Some(lease) = frame.held.leases().iter().find(|lease| matches(lease)) {
                return Some(Arc::clone(lease));
            }
            current = frame.parent.as_deref();
        }
        None
    })
    .ok()
    .flatten()
}

/// The current task's lease, read from its locked scopes (kept here, so
/// that a lease need not know about scopes).
impl Lease {
    /// The lease of the innermost lock held by the current task's locked
    /// scope (see [`LockGuard::scope`](crate::LockGuard::scope)): `None`
    /// outside any locked scope, or inside a multi-lock's scope.
    ///
    /// ```
    /// use lock_core::{Lease, Locker};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), lock_core::LockError> {
    /// let locker = Locker::memory();
    /// let guard = locker.lock("order:42").await?;
    /// assert!(Lease::current().is_none());
    /// guard.scope(async {
    ///     assert_eq!(Lease::current().unwrap().key(), "order:42");
    /// }).await;
    /// guard.release().await
    /// # }
    /// ```
    pub fn current() -> Option<Lease> {
        innermost_lease().map(Lease::new)
    }
}

/// The current task's tokens, read from its locked scopes (kept here, so
/// that a token stays a plain value that the stores can use).
impl FencingToken {
    /// The token of the innermost lock held by the current task's locked
    /// scope (see [`LockGuard::scope`](crate::LockGuard::scope)), or `None`
    /// outside any locked scope. Inside a multi-lock's scope holding
    /// several keys it is `None`: use [`current_for`](Self::current_for).
    pub fn current() -> Option<FencingToken> {
        innermost_token()
    }

    /// The token of `key` (a user key, as given to
    /// [`Locker::lock`](crate::Locker::lock)) if the current task's locked
    /// scopes hold it (through any Locker), innermost first: each key's
    /// token inside a [`MultiGuard::scope`](crate::MultiGuard::scope).
    ///
    /// ```
    /// use lock_core::{FencingToken, Locker};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), lock_core::LockError> {
    /// let locker = Locker::memory();
    /// let guard = locker.lock("order:42").await?;
    /// guard.scope(async {
    ///     assert_eq!(FencingToken::current_for("order:42"), Some(guard.token()));
    ///     assert_eq!(FencingToken::current_for("order:43"), None);
    /// }).await;
    /// guard.release().await
    /// # }
    /// ```
    pub fn current_for(key: impl AsRef<str>) -> Option<FencingToken> {
        token_for(key.as_ref())
    }
}
