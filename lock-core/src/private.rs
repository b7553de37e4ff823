//! What the expansion of `#[distributed_lock]` calls. Not a public API:
//! names and signatures change without notice.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::error::LockError;
use crate::locker::Locker;

use crate::guard::OnLost;

/// Options fixed by the attribute; `None` takes the Locker's default.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Lease length.
    pub ttl: Option<Duration>,
    /// Bound on waiting.
    pub wait: Option<Duration>,
    /// Renew while held.
    pub watchdog: Option<bool>,
    /// Reaction to a lost lease.
    pub on_lost: OnLost,
}

/// Anything the `locker = <expr>` argument may yield.
pub trait IntoLocker {
    /// A handle on the Locker (an `Arc` clone).
    fn locker(&self) -> Locker;
}

impl IntoLocker for Locker {
    fn locker(&self) -> Locker {
        self.clone()
    }
}

impl<T: IntoLocker + ?Sized> IntoLocker for &T {
    fn locker(&self) -> Locker {
        (**self).locker()
    }
}

impl<T: IntoLocker + ?Sized> IntoLocker for &mut T {
    fn locker(&self) -> Locker {
        (**self).locker()
    }
}

impl<T: IntoLocker + ?Sized> IntoLocker for Arc<T> {
    fn locker(&self) -> Locker {
        (**self).locker()
    }
}

impl<T: IntoLocker + ?Sized> IntoLocker for Box<T> {
    fn locker(&self) -> Locker {
        (**self).locker()
    }
}

/// The Locker named by the attribute.
pub fn given(locker: &impl IntoLocker) -> Result<Locker, LockError> {
    Ok(locker.locker())
}

/// The installed Locker, or the error that says to install one.
pub fn installed(key: &str) -> Result<Locker, LockError> {
    crate::installed().ok_or_else(|| LockError::NotInstalled {
        key: LockError::shown(key),
    })
}

/// Takes the lock, runs `body` as its holder, releases. A body that ran to
/// the end returns its output even if the release fails (the failure is
/// logged): its writes happened, and fencing decided their fate.
pub async fn run<F: Future>(
    locker: Result<Locker, LockError>,
    key: String,
    options: Options,
    body: F,
) -> Result<F::Output, LockError> {
    let mut request = locker?.lock(key);
    if let Some(ttl) = options.ttl {
        request = request.ttl(ttl);
    }
    if let Some(wait) = options.wait {
        request = request.wait(wait);
    }
    if let Some(watchdog) = options.watchdog {
        request = request.watchdog(watchdog);
    }
    let guard = request.await?;
    let output = match options.on_lost {
        OnLost::Continue => guard.scope(body).await,
        OnLost::Abort => {
            let lost = guard.lost();
            tokio::select! {
                biased;
                output = guard.scope(body) => output,
                // Dropping the guard on return releases in the background.
                err = lost => return Err(err),
            }
        }
    };
    let key = guard.key().to_owned();
    if let Err(err) = guard.release().await {
        tracing::warn!(key = %key, error = %err, "locked function finished, but its release failed");
    }
    Ok(output)
}

/// Turns a lock failure into the function's own return type.
#[diagnostic::on_unimplemented(
    message = "a #[distributed_lock] function must return `Result<T, E>` with `E: From<lock_core::LockError>`",
    label = "`{Self}` cannot carry a lock error",
    note = "add `impl From<lock_core::LockError> for YourError`, or return `Result<T, lock_core::LockError>`"
)]
pub trait FromLockError {
    /// `Err(error.into())`.
    fn from_lock_error(error: LockError) -> Self;
}

impl<T, E: From<LockError>> FromLockError for Result<T, E> {
    fn from_lock_error(error: LockError) -> Self {
        Err(E::from(error))
    }
}

/// `R::from_lock_error(error)`, spanned at the function's return type.
pub fn lock_failed<R: FromLockError>(error: LockError) -> R {
    R::from_lock_error(error)
}

/// Milliseconds into a Duration (the expansion spells durations this way).
pub const fn millis(ms: u64) -> Duration {
    Duration::from_millis(ms)
}
