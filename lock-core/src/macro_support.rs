//! What the expansion of `#[distributed_lock]` calls. Not a public API:
//! names and signatures change without notice.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::error::LockError;
use crate::guard::OnLost;
use crate::kind::LockKind;
use crate::locker::Locker;
use crate::options::LockOptions;
use crate::outcome::Outcome;

/// What the attribute fixes.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Lease length (`None`: the Locker's default).
    pub ttl: Option<Duration>,
    /// Wait for a held lock (`None`: the Locker's default).
    pub wait: Option<Duration>,
    /// Whether the watchdog renews (`None`: the Locker's default).
    pub watchdog: Option<bool>,
    /// The least hold.
    pub hold_at_least: Option<Duration>,
    /// Reaction to a lost lease.
    pub on_lost: OnLost,
    /// Which kind of lock.
    pub kind: LockKind,
}

impl Options {
    /// The request's options.
    fn lock(&self) -> LockOptions {
        LockOptions {
            ttl: self.ttl,
            wait: self.wait,
            watchdog: self.watchdog,
            hold_at_least: self.hold_at_least,
        }
    }
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
    let locker = locker?;
    let request = locker.lock_of(key, options.kind).options(options.lock());
    let guard = request.await?;
    let output = hold(guard.scope(body), guard.lost(), options.on_lost).await?;
    let key = guard.key().to_owned();
    if let Err(err) = guard.release().await {
        tracing::warn!(key = %key, error = %err, "locked function finished, but its release failed");
    }
    Ok(output)
}

/// [`run`] for `if_held = "skip"`: never waits; `Ok(None)`, the body not
/// entered, when the lock is held.
pub async fn run_or_skip<F: Future>(
    locker: Result<Locker, LockError>,
    key: String,
    options: Options,
    body: F,
) -> Result<Option<F::Output>, LockError> {
    let locker = locker?;
    let request = locker.lock_of(key, options.kind).options(options.lock());
    let Some(guard) = request.if_held_skip().await? else {
        return Ok(None);
    };
    let output = hold(guard.scope(body), guard.lost(), options.on_lost).await?;
    let key = guard.key().to_owned();
    if let Err(err) = guard.release().await {
        tracing::warn!(key = %key, error = %err, "locked function finished, but its release failed");
    }
    Ok(Some(output))
}

/// [`run`] for `keys = [...]`: takes every key ([`Locker::lock_all`]).
pub async fn run_all<F: Future>(
    locker: Result<Locker, LockError>,
    keys: Vec<String>,
    options: Options,
    body: F,
) -> Result<F::Output, LockError> {
    let guard = locker?.lock_all(keys).options(options.lock()).await?;
    let output = hold(guard.scope(body), guard.lost(), options.on_lost).await?;
    if let Err(err) = guard.release().await {
        tracing::warn!(error = %err, "locked function finished, but a release failed");
    }
    Ok(output)
}

/// Runs the scoped body; with [`OnLost::Abort`], a loss first drops it
/// (the caller's guard, dropped on return, releases in the background).
async fn hold<F: Future>(
    body: crate::Scoped<F>,
    lost: impl Future<Output = LockError>,
    on_lost: OnLost,
) -> Result<F::Output, LockError> {
    match on_lost {
        OnLost::Continue => Ok(body.await),
        OnLost::Abort => {
            tokio::select! {
                biased;
                output = body => Ok(output),
                err = lost => Err(err),
            }
        }
    }
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

/// The return type of a function under `if_held = "skip"`:
/// `Result<Outcome<T>, E>`, whose body returns `Result<T, E>`.
#[diagnostic::on_unimplemented(
    message = "`if_held = \"skip\"` needs the return type `Result<Outcome<T>, E>`, so that a skipped call is never taken for one that ran",
    label = "`{Self}` cannot tell that the call was skipped",
    note = "return `Result<lock_core::Outcome<T>, E>`; the body still returns `Result<T, E>`, and a skipped call returns `Ok(Outcome::Skipped)` without entering it"
)]
pub trait SkipReturn: Sized {
    /// What the body returns: `Result<T, E>`.
    type Body;
    /// The call ran: the body's `Ok(value)` becomes `Ok(Outcome::Ran(value))`.
    fn ran(body: Self::Body) -> Self;
    /// `Ok(Outcome::Skipped)`.
    fn skipped() -> Self;
}

impl<T, E> SkipReturn for Result<Outcome<T>, E> {
    type Body = Result<T, E>;

    fn ran(body: Result<T, E>) -> Self {
        body.map(Outcome::Ran)
    }

    fn skipped() -> Self {
        Ok(Outcome::Skipped)
    }
}

/// `R::ran(body)`, spanned at the function's return type.
pub fn ran<R: SkipReturn>(body: R::Body) -> R {
    R::ran(body)
}

/// `R::skipped()`, spanned at the function's return type.
pub fn skipped<R: SkipReturn>() -> R {
    R::skipped()
}

/// Milliseconds into a Duration (the expansion spells durations this way).
pub const fn millis(ms: u64) -> Duration {
    Duration::from_millis(ms)
}
