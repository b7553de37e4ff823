//! [`Leadership`]: the lease an election's campaign wins.

use std::future::Future;
use std::sync::Arc;

use crate::error::LockError;
use crate::guard::LockGuard;
use crate::lease::Lease;
use crate::scope::Scoped;
use crate::token::FencingToken;

/// The leadership of a key: a lease with the usual watchdog, its fencing
/// token and a loss signal, and the value it published. Dropping it
/// resigns in the background.
///
/// Pass [`token`](Self::token) to every write the leader makes: a leader
/// that paused past its lease is then refused by the store it writes to,
/// even if it has not yet heard that it lost ([`lost`](Self::lost)).
///
/// ```
/// use lock_core::{FencingToken, LockError, Locker};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), LockError> {
/// let locker = Locker::memory();
/// let leadership = locker.election("outbox-relay").value("node-a").await?;
/// assert!(leadership.is_held());
/// assert_eq!(leadership.value(), Some("node-a"));
/// tokio::select! {
///     lost = leadership.lost() => return Err(lost), // deposed: stop writing
///     () = leadership.scope(async {
///         // Writes here take FencingToken::current(), the term's token.
///         assert_eq!(FencingToken::current(), Some(leadership.token()));
///     }) => {}
/// }
/// leadership.resign().await // the next candidate leads at once
/// # }
/// ```
#[must_use = "dropping a Leadership resigns at once"]
pub struct Leadership {
    /// `None` once resigned.
    guard: Option<LockGuard>,
    value: Option<Arc<str>>,
}

impl Leadership {
    pub(super) fn new(guard: LockGuard, value: Option<&str>) -> Self {
        Leadership {
            guard: Some(guard),
            value: value.map(Arc::from),
        }
    }

    fn guard(&self) -> &LockGuard {
        self.guard.as_ref().expect("held until resigned or dropped")
    }

    /// The election's key.
    pub fn key(&self) -> &str {
        self.guard().key()
    }

    /// The fencing token of this term: higher than every earlier leader's.
    pub fn token(&self) -> FencingToken {
        self.guard().token()
    }

    /// The value published with the leadership.
    pub fn value(&self) -> Option<&str> {
        self.value.as_deref()
    }

    /// Whether it still leads: not lost, not resigned, within the local
    /// deadline of its lease.
    pub fn is_held(&self) -> bool {
        self.guard().is_held()
    }

    /// Resolves with [`LockError::Lost`] when the leadership is lost (see
    /// [`LockGuard::lost`]); never if it is resigned.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub fn lost(&self) -> impl Future<Output = LockError> + Send + 'static {
        self.guard().lost()
    }

    /// A cloneable view of the lease (key, token, state, loss signal).
    pub fn lease(&self) -> Lease {
        self.guard().lease()
    }

    /// Runs `body` as the holder of the election's lock: inside it,
    /// [`FencingToken::current`] is this term's token.
    pub fn scope<F: Future>(&self, body: F) -> Scoped<F> {
        self.guard().scope(body)
    }

    /// Gives the leadership up at once: a waiting candidate leads within a
    /// round trip, and observers hear of it. [`LockError::Lost`] if it had
    /// been lost already.
    ///
    /// # Cancel safety
    /// If dropped before it completes, the resignation goes on in the
    /// background (it runs on a task of its own).
    pub async fn resign(mut self) -> Result<(), LockError> {
        let guard = self.guard.take().expect("held until resigned or dropped");
        match tokio::spawn(resign(guard)).await {
            Ok(resigned) => resigned,
            Err(failed) if failed.is_panic() => std::panic::resume_unwind(failed.into_panic()),
            // The runtime is shutting down: the guard's drop gave the lease back.
            Err(_) => Ok(()),
        }
    }
}

/// Releases `guard`, then tells the key's observers.
async fn resign(guard: LockGuard) -> Result<(), LockError> {
    let lease = Arc::clone(&guard.lease);
    let released = guard.release().await;
    lease.announce().await;
    released
}

impl Drop for Leadership {
    fn drop(&mut self) {
        let Some(guard) = self.guard.take() else {
            return;
        };
        // Without a runtime the guard's own drop gives the lease back.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = resign(guard).await;
            });
        }
    }
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("Leadership");
        if let Some(guard) = &self.guard {
            out.field("key", &guard.key())
                .field("token", &guard.token());
        }
        out.field("value", &self.value).finish()
    }
}
