//! [`Lease`]: a cloneable view of a held lock, for code that does not own
//! the guard (request handlers behind a layer, spawned helpers).

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::LockError;
use crate::lease::{LeaseState, Status};
use crate::token::FencingToken;

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
        if self.state.status() != Status::Held {
            return Duration::ZERO;
        }
        self.state
            .deadline()
            .saturating_duration_since(Instant::now())
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
