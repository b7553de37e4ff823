//! The process-global Locker used by `#[distributed_lock]` functions that
//! name no `locker = ...`.

use std::sync::OnceLock;

use crate::error::LockError;
use crate::locker::Locker;

static INSTALLED: OnceLock<Locker> = OnceLock::new();

/// Installs the Locker that `#[distributed_lock]` functions without
/// `locker = ...` use. Call it once at start-up; a second call is an error
/// (the first Locker stays).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), lock_core::LockError> {
/// lock_core::install(lock_core::Locker::from_env().await?)?;
/// assert!(lock_core::installed().is_some());
/// assert!(lock_core::install(lock_core::Locker::memory()).is_err());
/// # Ok(())
/// # }
/// ```
pub fn install(locker: Locker) -> Result<(), LockError> {
    INSTALLED.set(locker).map_err(|_| {
        LockError::invalid_config(
            "install",
            "a Locker is already installed for this process; install once at start-up, or \
             pass `locker = ...` to the attribute",
        )
    })
}

/// The installed Locker, if any.
pub fn installed() -> Option<Locker> {
    INSTALLED.get().cloned()
}
