//! [`LockOptions`]: what one request may set apart from its Locker's
//! defaults, for a lock of one key and for `lock_all` alike.

use std::time::Duration;

use crate::locker::{Config, MIN_TTL};

/// The lease length, wait and watchdog of one request; each one left
/// `None` keeps what the request had (the Locker's default unless set
/// before). [`LockRequest`](crate::LockRequest)
/// and [`LockAllRequest`](crate::LockAllRequest) take them one by one
/// (`.ttl(..)`) or together (`.options(..)`), as the attribute does.
///
/// ```
/// use std::time::Duration;
/// use lock_core::{LockOptions, Locker};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), lock_core::LockError> {
/// let quick = LockOptions::new().wait(Duration::from_millis(200));
/// assert_eq!(quick.wait, Some(Duration::from_millis(200)));
/// assert_eq!(quick.ttl, None); // the Locker's
/// let locker = Locker::memory();
/// let guard = locker.lock("order:42").options(quick).await?;
/// guard.release().await
/// # }
/// ```
///
/// Its fields are public to read; it is built with [`new`](Self::new) and
/// the setters, so that an option added later is not a breaking change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockOptions {
    /// Lease length (at least 30 ms; shorter values are raised to it).
    pub ttl: Option<Duration>,
    /// How long to wait for a held lock; zero tries once.
    pub wait: Option<Duration>,
    /// Whether the lease is renewed while the guard lives.
    pub watchdog: Option<bool>,
    /// Keep the lease at least this long after the acquire, even if the
    /// guard is released sooner (see [`LockRequest::hold_at_least`](crate::LockRequest::hold_at_least));
    /// a multi-lock refuses it.
    pub hold_at_least: Option<Duration>,
}

/// The settings a request runs with: its options over the Locker's.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    pub(crate) ttl: Duration,
    pub(crate) wait: Duration,
    pub(crate) watchdog: bool,
    pub(crate) hold_at_least: Option<Duration>,
}

impl LockOptions {
    /// No option set: every one is the request's (or the Locker's).
    ///
    /// ```
    /// assert_eq!(lock_core::LockOptions::new(), lock_core::LockOptions::default());
    /// ```
    pub const fn new() -> Self {
        LockOptions {
            ttl: None,
            wait: None,
            watchdog: None,
            hold_at_least: None,
        }
    }

    /// Sets the lease length ([`LockRequest::ttl`](crate::LockRequest::ttl)).
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let options = lock_core::LockOptions::new().ttl(Duration::from_secs(10));
    /// assert_eq!(options.ttl, Some(Duration::from_secs(10)));
    /// ```
    pub const fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Sets the wait for a held lock ([`LockRequest::wait`](crate::LockRequest::wait)).
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let options = lock_core::LockOptions::new().wait(Duration::ZERO); // try once
    /// assert_eq!(options.wait, Some(Duration::ZERO));
    /// ```
    pub const fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Sets whether the lease is renewed ([`LockRequest::watchdog`](crate::LockRequest::watchdog)).
    ///
    /// ```
    /// let options = lock_core::LockOptions::new().watchdog(false);
    /// assert_eq!(options.watchdog, Some(false));
    /// ```
    pub const fn watchdog(mut self, watchdog: bool) -> Self {
        self.watchdog = Some(watchdog);
        self
    }

    /// Sets the least hold ([`LockRequest::hold_at_least`](crate::LockRequest::hold_at_least)).
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let options = lock_core::LockOptions::new().hold_at_least(Duration::from_secs(60));
    /// assert_eq!(options.hold_at_least, Some(Duration::from_secs(60)));
    /// ```
    pub const fn hold_at_least(mut self, hold: Duration) -> Self {
        self.hold_at_least = Some(hold);
        self
    }

    /// These options over `other`: each one set here wins.
    pub(crate) fn over(self, other: LockOptions) -> LockOptions {
        LockOptions {
            ttl: self.ttl.or(other.ttl),
            wait: self.wait.or(other.wait),
            watchdog: self.watchdog.or(other.watchdog),
            hold_at_least: self.hold_at_least.or(other.hold_at_least),
        }
    }

    /// The settings of a request with these options on a Locker of
    /// `config`.
    pub(crate) fn settled(self, config: &Config) -> Settings {
        Settings {
            ttl: self.ttl.unwrap_or(config.ttl).max(MIN_TTL),
            wait: self.wait.unwrap_or(config.wait),
            watchdog: self.watchdog.unwrap_or(config.watchdog),
            hold_at_least: self.hold_at_least,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::LockOptions;
    use crate::locker::{Config, MIN_TTL};

    #[test]
    fn set_options_win_and_unset_ones_keep_what_was_there() {
        let before = LockOptions {
            ttl: Some(Duration::from_secs(5)),
            wait: Some(Duration::from_secs(1)),
            watchdog: None,
            hold_at_least: None,
        };
        let later = LockOptions {
            wait: Some(Duration::ZERO),
            watchdog: Some(false),
            ..LockOptions::default()
        };
        let merged = later.over(before);
        assert_eq!(merged.ttl, Some(Duration::from_secs(5)));
        assert_eq!(merged.wait, Some(Duration::ZERO));
        assert_eq!(merged.watchdog, Some(false));
    }

    #[test]
    fn unset_options_take_the_lockers_and_a_short_ttl_is_raised() {
        let config = Config::default();
        let settings = LockOptions::default().settled(&config);
        assert_eq!(
            (settings.ttl, settings.wait, settings.watchdog),
            (config.ttl, config.wait, config.watchdog)
        );
        let short = LockOptions {
            ttl: Some(Duration::from_millis(1)),
            ..LockOptions::default()
        };
        assert_eq!(short.settled(&config).ttl, MIN_TTL);
    }
}
