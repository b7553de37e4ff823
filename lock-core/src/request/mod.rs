//! [`LockRequest`]: one acquisition's options, awaited as a
//! [`LockFuture`](crate::LockFuture).

mod future;

pub use self::future::LockFuture;

use std::future::IntoFuture;
use std::sync::Arc;
use std::time::Duration;

use crate::acquire::Acquisition;
use crate::backend::stored_keys::StoredKeys;
use crate::error::LockError;
use crate::guard::LockGuard;
use crate::kind::LockKind;
use crate::locker::Locker;
use crate::options::LockOptions;

/// A request for one lock, made by [`Locker::lock`]; set options, then
/// `.await` it.
///
/// ```
/// use lock_core::{LockError, Locker};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), LockError> {
/// let locker = Locker::memory();
/// let guard = locker
///     .lock("invoice:7")
///     .ttl(Duration::from_secs(5))   // lease length, renewed every ttl/3
///     .wait(Duration::from_secs(1))  // zero: try once
///     .watchdog(true)
///     .await?;
/// guard.release().await
/// # }
/// ```
///
/// # Cancel safety
/// Dropping the future at any await point never leaves a lock held: before
/// the lease exists nothing is stored; a store request that was in flight
/// and may have been applied is undone by owner value in the background
/// (or runs out at its TTL); once the guard exists, dropping it releases.
#[must_use = "a LockRequest does nothing until awaited"]
#[derive(Debug)]
pub struct LockRequest {
    locker: Locker,
    /// The key's stored names, laid out when the request is made (a bad
    /// key's error is returned when the request is awaited; boxed, so
    /// that every request stays small).
    keys: Result<StoredKeys, Box<LockError>>,
    kind: LockKind,
    options: LockOptions,
    /// The value an election's candidate publishes, encoded.
    published: Option<Arc<str>>,
}

impl LockRequest {
    pub(crate) fn new(locker: Locker, key: &str) -> Self {
        let config = &locker.config();
        LockRequest {
            keys: StoredKeys::new(&config.namespace, key).map_err(Box::new),
            kind: LockKind::Exclusive,
            options: LockOptions::default(),
            published: None,
            locker,
        }
    }

    /// Lease length (at least 30 ms; shorter values are raised to it).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.options.ttl = Some(ttl);
        self
    }

    /// How long to wait for a held lock before [`LockError::WaitTimeout`];
    /// zero tries once.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.options.wait = Some(wait);
        self
    }

    /// Whether the lease is renewed while the guard lives. Without it the
    /// lease ends at its ttl and the guard reports it lost.
    pub fn watchdog(mut self, watchdog: bool) -> Self {
        self.options.watchdog = Some(watchdog);
        self
    }

    /// Keeps the lease at least `hold` after the acquire was sent: a release
    /// (or drop) sooner only marks the guard done, and the lease, renewed
    /// by its watchdog as before, is given back at that time, in the
    /// background. For a scheduled job: a replica whose timer runs a little
    /// early or late finds the lock still held and skips
    /// ([`if_held_skip`](Self::if_held_skip)) instead of running the job
    /// twice. If the process ends meanwhile, the lease ends at its ttl.
    ///
    /// ```
    /// use lock_core::{LockError, Locker};
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), LockError> {
    /// let locker = Locker::memory();
    /// let job = locker
    ///     .lock("job:nightly-report")
    ///     .hold_at_least(Duration::from_secs(60))
    ///     .await?;
    /// job.release().await?; // done quickly; the lock stays for the minute
    /// assert!(locker.lock("job:nightly-report").if_held_skip().await?.is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn hold_at_least(mut self, hold: Duration) -> Self {
        self.options.hold_at_least = Some(hold);
        self
    }

    /// The options `options` sets, over those set before.
    pub fn options(mut self, options: LockOptions) -> Self {
        self.options = options.over(self.options);
        self
    }

    /// Publishes `value` with the lease (an election's candidate): it is
    /// part of the owner value, so whoever reads the holder reads it.
    pub(crate) fn publish(mut self, value: Arc<str>) -> Self {
        self.published = Some(value);
        self
    }

    /// Asks for `kind` instead of an exclusive lease; a count out of
    /// bounds is an error when the request is awaited.
    pub(crate) fn kind(mut self, kind: LockKind) -> Self {
        let count = match kind {
            LockKind::Permit { of } => Some(("permits", of)),
            LockKind::Segment { of } => Some(("segments", of)),
            _ => None,
        };
        if let Some((what, n)) = count
            && !(1..=MAX_PERMITS_OR_SEGMENTS).contains(&n)
        {
            let reason = format!("{n} is not between 1 and {MAX_PERMITS_OR_SEGMENTS}");
            self.keys = Err(Box::new(LockError::invalid_config(what, reason)));
        }
        self.kind = kind;
        self
    }

    /// Never waits: `Ok(None)` when another owner (or another task of this
    /// process) holds the lock, which is a skip, not an error: for work
    /// that one replica of many should do, such as a scheduled job. The
    /// key and the options are checked as for `.await`, whatever kind of
    /// lock is asked for.
    ///
    /// ```
    /// use lock_core::{LockError, Locker};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), LockError> {
    /// let locker = Locker::memory();
    /// let held = locker.lock("job:nightly-report").await?;
    /// // Another replica's tick: the job is running, so it skips.
    /// assert!(locker.lock("job:nightly-report").if_held_skip().await?.is_none());
    /// held.release().await?;
    /// let run = locker.lock("job:nightly-report").if_held_skip().await?;
    /// assert!(run.is_some());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe: see [`LockRequest`].
    pub async fn if_held_skip(self) -> Result<Option<LockGuard>, LockError> {
        self.try_once().await
    }

    /// Tries once; `Ok(None)` when the lock is held elsewhere.
    pub(crate) async fn try_once(mut self) -> Result<Option<LockGuard>, LockError> {
        self.options.wait = Some(Duration::ZERO);
        let mut acquisition = self.checked()?;
        acquisition.skip_if_held = true;
        match acquisition.first_step().finish().await {
            Ok(guard) => Ok(Some(guard)),
            Err(LockError::WaitTimeout { .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// The request with its key and kind checked (before any store round
    /// trip), or the error.
    pub(crate) fn checked(self) -> Result<Acquisition, LockError> {
        let keys = self.keys.map_err(|err| *err)?;
        let backend = &self.locker.backend();
        if !backend.supports(self.kind) {
            return Err(LockError::Unsupported {
                key: LockError::shown(keys.user()),
                kind: self.kind,
                store: backend.describe(),
            });
        }
        let settings = self.options.settled(self.locker.config());
        if let Some(hold) = settings.hold_at_least {
            let config = self.locker.config();
            let why = if !settings.watchdog && hold >= settings.ttl {
                Some(
                    "is not below the ttl without a watchdog: the lease ends at its ttl; raise the ttl or keep the watchdog",
                )
            } else if config.max_hold.is_some_and(|most| hold > most) {
                Some("is longer than the Locker's max_hold, which ends every lease sooner")
            } else {
                None
            };
            if let Some(why) = why {
                return Err(LockError::invalid_config("hold_at_least", why));
            }
        }
        Ok(Acquisition {
            keys,
            kind: self.kind,
            locker: self.locker,
            ttl: settings.ttl,
            wait: settings.wait,
            watchdog: settings.watchdog,
            hold_at_least: settings.hold_at_least,
            published: self.published,
            skip_if_held: false,
        })
    }
}

/// The most permits of a semaphore, or segments of a striped lock.
pub const MAX_PERMITS_OR_SEGMENTS: u32 = 1024;

impl IntoFuture for LockRequest {
    type Output = Result<LockGuard, LockError>;
    type IntoFuture = LockFuture;

    fn into_future(self) -> LockFuture {
        LockFuture::new(self)
    }
}

#[cfg(test)]
mod tests;

/// The requests for each kind of lock on one key.
impl Locker {
    /// A request for the lock on `key`; set `.ttl`, `.wait`, `.watchdog`
    /// and await it. The key is checked and its stored names laid out here
    /// (the request keeps no copy of `key`); an empty or over-long key is
    /// [`LockError::InvalidKey`] when the request is awaited.
    pub fn lock(&self, key: impl AsRef<str>) -> LockRequest {
        LockRequest::new(self.clone(), key.as_ref())
    }

    /// A request for the lock of kind `kind` on `key`: the one method
    /// behind the others, for code that picks the kind at run time (the
    /// attribute, the layer).
    ///
    /// ```
    /// use lock_core::{LockKind, Locker};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), lock_core::LockError> {
    /// let locker = Locker::memory();
    /// let permit = locker.lock_of("exports", LockKind::Permit { of: 4 }).await?;
    /// permit.release().await
    /// # }
    /// ```
    pub fn lock_of(&self, key: impl AsRef<str>, kind: LockKind) -> LockRequest {
        self.lock(key).kind(kind)
    }

    /// A request for the fair lock on `key`: one holder at a time, granted
    /// in the order the requests reached the store, across every process
    /// and within one (there, in call order): each request takes its own
    /// queue entry in the store when it starts waiting, whether or not another
    /// task of this Locker holds or waits for the key.
    ///
    /// A waiter's queue entry is leased for the request's ttl and refreshed
    /// while it waits: a waiter that gives up or is cancelled withdraws it
    /// at once, a killed one's queue entry lapses within its ttl, so a dead
    /// waiter delays the queue by at most that. The fair lock and the plain lock
    /// on one key are two locks that do not exclude each other.
    ///
    /// ```
    /// use lock_core::Locker;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), lock_core::LockError> {
    /// let locker = Locker::memory();
    /// let guard = locker.fair_lock("payouts").await?;
    /// guard.release().await
    /// # }
    /// ```
    pub fn fair_lock(&self, key: impl AsRef<str>) -> LockRequest {
        self.lock(key).kind(LockKind::Fair)
    }

    /// A request for the read lock on `key`: shared with other readers,
    /// excluded by a writer ([`write_lock`](Self::write_lock)). A writer
    /// waiting for the key blocks new readers, so a stream of readers
    /// cannot starve writers.
    ///
    /// Readers and writers of a key draw from one token sequence: a
    /// writer's token is above every token issued before it, readers'
    /// included. Inside a scope holding the write lock of the key, a read
    /// lock is granted at once (the write covers it).
    ///
    /// ```
    /// use lock_core::Locker;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), lock_core::LockError> {
    /// let locker = Locker::memory();
    /// let a = locker.read_lock("catalog").await?;
    /// let b = locker.read_lock("catalog").await?; // readers share
    /// assert!(locker.write_lock("catalog").wait(std::time::Duration::ZERO).await.is_err());
    /// a.release().await?;
    /// b.release().await
    /// # }
    /// ```
    pub fn read_lock(&self, key: impl AsRef<str>) -> LockRequest {
        self.lock(key).kind(LockKind::Read)
    }

    /// A request for the write lock on `key`: excludes readers and other
    /// writers (see [`read_lock`](Self::read_lock)). Asked for inside a
    /// scope holding the read lock of the key, it fails at once with
    /// [`LockError::UpgradeWouldDeadlock`] instead of waiting for itself.
    /// The read-write lock and the plain lock on one key are two locks.
    pub fn write_lock(&self, key: impl AsRef<str>) -> LockRequest {
        self.lock(key).kind(LockKind::Write)
    }

    /// A request for one of `permits` leases on `key` (a semaphore): at most
    /// `permits` holders at once across every process, each with its own
    /// lease, watchdog and token. Set options on the returned
    /// [`LockRequest`], then `.await` it.
    ///
    /// Every process must name the same `permits` for a key: a request
    /// naming another number while permits are held fails with
    /// [`LockError::SizeDisagrees`]. `permits` must be 1 to 1024
    /// ([`LockError::InvalidConfig`], before any store round trip).
    ///
    /// A permit's token fences per holder, not per resource: two holders
    /// of one semaphore hold at once, so a store fenced on one key would
    /// reject the holder with the older token. Fence each holder's own
    /// work, or use a lock per resource. A semaphore and a plain lock on
    /// the same key do not exclude each other. Waiting tasks of one process
    /// queue up locally: the front asks the store, and hands the front on as
    /// soon as it is granted a permit.
    ///
    /// ```
    /// use lock_core::Locker;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), lock_core::LockError> {
    /// let locker = Locker::memory();
    /// let first = locker.semaphore("exports", 2).await?;
    /// let second = locker.semaphore("exports", 2).await?;
    /// assert!(locker.try_semaphore("exports", 2).await?.is_none()); // both in use
    /// first.release().await?;
    /// second.release().await
    /// # }
    /// ```
    pub fn semaphore(&self, key: impl AsRef<str>, permits: u32) -> LockRequest {
        self.lock(key).kind(LockKind::Permit { of: permits })
    }

    /// Tries once for one of `permits` leases on `key`: `Ok(None)` when
    /// all are held (see [`semaphore`](Self::semaphore)).
    ///
    /// # Cancel safety
    /// Cancel safe: see [`LockRequest`].
    pub async fn try_semaphore(
        &self,
        key: impl AsRef<str>,
        permits: u32,
    ) -> Result<Option<LockGuard>, LockError> {
        self.semaphore(key, permits).try_once().await
    }

    /// A request for any one free segment of `segments` on `key` (a striped
    /// lock, as a shop splits one item's stock into segments so that one
    /// hot item does not serialise every order): it waits only
    /// when every segment is held, and [`LockGuard::segment`] says which
    /// one it got (the lowest free one). Each segment has one holder at a
    /// time, with its own lease, watchdog and token.
    ///
    /// As with [`semaphore`](Self::semaphore), every process must name the
    /// same `segments` for a key ([`LockError::SizeDisagrees`]), 1 to 1024,
    /// and a process's waiters queue up locally.
    ///
    /// ```
    /// use lock_core::Locker;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), lock_core::LockError> {
    /// let locker = Locker::memory();
    /// let a = locker.striped("stock:sku-7", 4).await?;
    /// let b = locker.striped("stock:sku-7", 4).await?;
    /// assert_eq!((a.segment(), b.segment()), (Some(0), Some(1)));
    /// // take stock from segment `a.segment()` ...
    /// a.release().await?;
    /// b.release().await
    /// # }
    /// ```
    pub fn striped(&self, key: impl AsRef<str>, segments: u32) -> LockRequest {
        self.lock(key).kind(LockKind::Segment { of: segments })
    }

    /// Tries once: `Ok(None)` when another owner (or another task of this
    /// process) holds the lock.
    ///
    /// # Cancel safety
    /// Cancel safe: see [`LockRequest`].
    pub async fn try_lock(&self, key: impl AsRef<str>) -> Result<Option<LockGuard>, LockError> {
        self.lock(key).try_once().await
    }
}
