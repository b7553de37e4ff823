//! What a call that skips a held lock did: ran, or was skipped.

/// What a call of a function under `#[distributed_lock(if_held = "skip")]`
/// did: it ran its body, which returned `T`, or it was skipped because
/// another owner held the lock. The function is declared to return
/// `Result<Outcome<T>, E>` while its body returns `Result<T, E>`, so a body
/// whose own value is `None` or `()` is never taken for a skip.
///
/// ```
/// use lock_core::{distributed_lock, LockError, Locker, Outcome};
///
/// // The body returns Result<Option<u32>, _>; the caller sees whether it ran.
/// #[distributed_lock(key = "job:sweep", locker = locker, if_held = "skip")]
/// async fn sweep(locker: &Locker) -> Result<Outcome<Option<u32>>, LockError> {
///     Ok(None) // nothing to sweep: it ran, and found nothing
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), LockError> {
/// let locker = Locker::memory();
/// assert_eq!(sweep(&locker).await?, Outcome::Ran(None));
/// let held = locker.lock("job:sweep").await?;
/// assert_eq!(sweep(&locker).await?, Outcome::Skipped);
/// held.release().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[must_use = "a skipped call did not run its body"]
pub enum Outcome<T> {
    /// The lock was free: the body ran and returned this.
    Ran(T),
    /// Another owner held the lock: the body was not entered.
    Skipped,
}

impl<T> Outcome<T> {
    /// The body's value, or `None` for a skipped call.
    ///
    /// ```
    /// use lock_core::Outcome;
    ///
    /// assert_eq!(Outcome::Ran(3).ran(), Some(3));
    /// assert_eq!(Outcome::<u32>::Skipped.ran(), None);
    /// ```
    pub fn ran(self) -> Option<T> {
        match self {
            Outcome::Ran(value) => Some(value),
            Outcome::Skipped => None,
        }
    }

    /// Whether the call was skipped.
    ///
    /// ```
    /// use lock_core::Outcome;
    ///
    /// assert!(Outcome::<()>::Skipped.is_skipped());
    /// assert!(!Outcome::Ran(()).is_skipped());
    /// ```
    pub fn is_skipped(&self) -> bool {
        matches!(self, Outcome::Skipped)
    }

    /// The body's value mapped by `f`; a skip stays a skip.
    ///
    /// ```
    /// use lock_core::Outcome;
    ///
    /// assert_eq!(Outcome::Ran(2).map(|n| n * 10), Outcome::Ran(20));
    /// ```
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Outcome<U> {
        match self {
            Outcome::Ran(value) => Outcome::Ran(f(value)),
            Outcome::Skipped => Outcome::Skipped,
        }
    }
}
