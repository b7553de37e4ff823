//! [`Locker`]: a backend plus defaults, and the requests it makes.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::LockGuard;
use crate::backend::{Backend, Claim, MemoryBackend};
use crate::builder::LockerBuilder;
use crate::error::LockError;
use crate::keys::StoredKeys;
use crate::line::Lines;
use crate::multi::LockAllRequest;
use crate::owner::OwnerPrefix;
use crate::places::Places;
use crate::request::LockRequest;
use crate::watchdog::Watchdogs;

/// Default lease length.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);
/// Default bound on waiting for a held lock.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);
/// Default namespace of stored keys.
pub const DEFAULT_NAMESPACE: &str = "lock";
/// Default bound on tasks of one process waiting for one key.
pub const DEFAULT_MAX_WAITERS_PER_KEY: usize = 100_000;
/// Shortest accepted lease.
pub const MIN_TTL: Duration = Duration::from_millis(30);

static NEXT_LOCKER_ID: AtomicU64 = AtomicU64::new(1);

/// A handle on one lock store plus defaults; cheap to clone (an `Arc`
/// inside), `Send + Sync`. Clones share the store connection, the
/// pub/sub connection and the process-local wait lines.
///
/// ```
/// use lock_core::Locker;
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), lock_core::LockError> {
/// // Redis: Locker::redis("redis://127.0.0.1:6379").await?
/// let locker = Locker::memory();
/// let guard = locker
///     .lock("order:42")
///     .ttl(Duration::from_secs(30))
///     .wait(Duration::from_secs(5))
///     .await?;
/// println!("writing with token {}", guard.token());
/// guard.release().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Locker {
    pub(crate) inner: Arc<LockerInner>,
}

pub(crate) struct LockerInner {
    pub(crate) id: u64,
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) config: Config,
    /// The start of every owner value this Locker makes.
    pub(crate) owner_prefix: OwnerPrefix,
    pub(crate) lines: Arc<Lines>,
    pub(crate) kind_lines: KindLines,
    /// The fair requests, which take no turn: each asks the store at once.
    pub(crate) fair: Arc<Places>,
    /// The turn to make a fair request's first try (one at a time per key,
    /// in call order), given up once it is answered.
    pub(crate) fair_sends: Arc<Lines>,
    pub(crate) watchdogs: Watchdogs,
}

impl LockerInner {
    /// The local lines that `claim` waits in (a fair request waits in none:
    /// see [`fair`](Self::fair)).
    pub(crate) fn lines_of(&self, claim: Claim) -> &Arc<Lines> {
        match claim {
            Claim::Read => &self.kind_lines.read,
            Claim::Write => &self.kind_lines.write,
            Claim::Permit { .. } => &self.kind_lines.permits,
            Claim::Segment { .. } => &self.kind_lines.segments,
            _ => &self.lines,
        }
    }
}

/// The local lines of the kinds of lock other than the plain and the fair
/// lock, one per kind (reads and writes apart, so that a writer is not held
/// back in its process behind a waiting reader). In each, one
/// task at a time asks the store and hands the turn on once granted, so
/// that the next asks at once: readers share; a writer behind another (or
/// behind a reader) of its own Locker marks the key in the store for
/// itself, and readers of other Lockers do not pass it.
pub(crate) struct KindLines {
    pub(crate) read: Arc<Lines>,
    pub(crate) write: Arc<Lines>,
    pub(crate) permits: Arc<Lines>,
    pub(crate) segments: Arc<Lines>,
}

impl KindLines {
    fn new(max_waiters_per_key: usize) -> Self {
        let line = || Lines::new(max_waiters_per_key);
        KindLines {
            read: line(),
            write: line(),
            permits: line(),
            segments: line(),
        }
    }

    fn all(&self) -> impl Iterator<Item = &Arc<Lines>> {
        [&self.read, &self.write, &self.permits, &self.segments].into_iter()
    }
}

/// Settings shared by every request of a Locker.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) namespace: String,
    pub(crate) ttl: Duration,
    pub(crate) wait: Duration,
    pub(crate) watchdog: bool,
    pub(crate) max_hold: Option<Duration>,
    pub(crate) max_waiters_per_key: usize,
    pub(crate) timeout: Duration,
    pub(crate) replicas: Option<(usize, Duration)>,
    /// Names this Locker's owners for operators (see `LockerBuilder::label`).
    pub(crate) label: String,
    /// Roots (PEM) a `rediss://` server's certificate is checked against
    /// instead of the system's.
    #[cfg(feature = "tls")]
    pub(crate) tls_roots: Option<Arc<[u8]>>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            namespace: DEFAULT_NAMESPACE.to_owned(),
            ttl: DEFAULT_TTL,
            wait: DEFAULT_WAIT,
            watchdog: true,
            max_hold: None,
            max_waiters_per_key: DEFAULT_MAX_WAITERS_PER_KEY,
            timeout: crate::backend::redis::DEFAULT_TIMEOUT,
            replicas: None,
            label: crate::owner::default_label(),
            #[cfg(feature = "tls")]
            tls_roots: None,
        }
    }
}

impl Locker {
    /// A Locker on the embedded in-process backend, with default settings.
    pub fn memory() -> Locker {
        Locker::from_parts(Arc::new(MemoryBackend::new()), Config::default())
    }

    /// A Locker on the Redis server at `url`, with default settings.
    ///
    /// Fails with [`LockError::Unavailable`] if the server cannot be reached
    /// within the default timeout (2 s), and with a variant of its own for
    /// what no retry fixes (a bad URL, credentials, access rules): see
    /// [`LockerBuilder::redis`].
    pub async fn redis(url: &str) -> Result<Locker, LockError> {
        Locker::builder().redis(url).await
    }

    /// A builder for namespace, defaults, timeouts and bounds.
    pub fn builder() -> LockerBuilder {
        LockerBuilder::new()
    }

    pub(crate) fn from_parts(backend: Arc<dyn Backend>, config: Config) -> Locker {
        Locker {
            inner: Arc::new(LockerInner {
                id: NEXT_LOCKER_ID.fetch_add(1, Ordering::Relaxed),
                lines: Lines::new(config.max_waiters_per_key),
                kind_lines: KindLines::new(config.max_waiters_per_key),
                fair: Places::new(config.max_waiters_per_key),
                fair_sends: Lines::new(config.max_waiters_per_key),
                watchdogs: Watchdogs::default(),
                owner_prefix: OwnerPrefix::new(&config.label),
                backend,
                config,
            }),
        }
    }

    /// A request for the lock on `key`; set `.ttl`, `.wait`, `.watchdog`
    /// and await it. The key is checked and its stored names laid out here
    /// (the request keeps no copy of `key`); an empty or over-long key is
    /// [`LockError::InvalidKey`] when the request is awaited.
    pub fn lock(&self, key: impl AsRef<str>) -> LockRequest {
        LockRequest::new(self.clone(), key.as_ref())
    }

    /// A request for the fair lock on `key`: one holder at a time, granted
    /// in the order the requests reached the store, across every process
    /// and within one (there, in call order): each request takes its own
    /// ticket in the store when it starts waiting, whether or not another
    /// task of this Locker holds or waits for the key.
    ///
    /// A waiter's ticket is leased for the request's ttl and refreshed
    /// while it waits: a waiter that gives up or is cancelled withdraws it
    /// at once, a killed one's ticket lapses within its ttl, so a dead
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
        self.lock(key).claim(Claim::Fair)
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
        self.lock(key).claim(Claim::Read)
    }

    /// A request for the write lock on `key`: excludes readers and other
    /// writers (see [`read_lock`](Self::read_lock)). Asked for inside a
    /// scope holding the read lock of the key, it fails at once with
    /// [`LockError::UpgradeWouldDeadlock`] instead of waiting for itself.
    /// The read-write lock and the plain lock on one key are two locks.
    pub fn write_lock(&self, key: impl AsRef<str>) -> LockRequest {
        self.lock(key).claim(Claim::Write)
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
    /// line up locally: the head asks the store, and hands its turn on as
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
        self.lock(key).claim(Claim::Permit { of: permits })
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
    /// lock, as the inventory seed splits one item's stock into segments so
    /// that one hot item does not serialise every order): it waits only
    /// when every segment is held, and [`LockGuard::segment`] says which
    /// one it got (the lowest free one). Each segment has one holder at a
    /// time, with its own lease, watchdog and token.
    ///
    /// As with [`semaphore`](Self::semaphore), every process must name the
    /// same `segments` for a key ([`LockError::SizeDisagrees`]), 1 to 1024,
    /// and a process's waiters line up locally.
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
        self.lock(key).claim(Claim::Segment { of: segments })
    }

    /// A request for every key of `keys`, held together or not at all:
    /// set options on the returned [`LockAllRequest`], then `.await` it
    /// for a [`MultiGuard`](crate::MultiGuard).
    ///
    /// Keys are taken in one canonical order (sorted; duplicates collapse),
    /// so tasks naming the same keys in different orders never deadlock
    /// (as long as neither already holds one of them when it calls).
    /// An empty set is [`LockError::InvalidKey`], as is any bad key, before
    /// any store round trip.
    pub fn lock_all<K: AsRef<str>>(&self, keys: impl IntoIterator<Item = K>) -> LockAllRequest {
        LockAllRequest::new(self.clone(), keys)
    }

    /// Tries once: `Ok(None)` when another owner (or another task of this
    /// process) holds the lock.
    ///
    /// # Cancel safety
    /// Cancel safe: see [`LockRequest`].
    pub async fn try_lock(&self, key: impl AsRef<str>) -> Result<Option<LockGuard>, LockError> {
        self.lock(key).try_once().await
    }

    /// The namespace stored keys are written under.
    pub fn namespace(&self) -> &str {
        &self.inner.config.namespace
    }

    /// The default lease length.
    pub fn default_ttl(&self) -> Duration {
        self.inner.config.ttl
    }

    /// The default bound on waiting.
    pub fn default_wait(&self) -> Duration {
        self.inner.config.wait
    }

    /// Checks `key` as a lock request would, without storing or allocating
    /// anything: `Err(LockError::InvalidKey)` names the key and what to do.
    /// For refusing bad input before other work.
    ///
    /// ```
    /// let locker = lock_core::Locker::memory();
    /// assert!(locker.check_key("order:42").is_ok());
    /// assert!(locker.check_key("").is_err());
    /// ```
    pub fn check_key(&self, key: &str) -> Result<(), LockError> {
        crate::keys::validate(key)
    }

    /// The names the lock on `key` is stored under (feature `test-util`).
    #[cfg(feature = "test-util")]
    pub fn stored_keys(&self, key: &str) -> Result<StoredKeys, LockError> {
        StoredKeys::new(&self.inner.config.namespace, key)
    }

    /// Tasks of this Locker waiting in the local line for `key` behind the
    /// one that holds or is taking it (for load shedding and metrics).
    pub fn local_waiters(&self, key: &str) -> usize {
        match StoredKeys::new(&self.inner.config.namespace, key) {
            Ok(keys) => {
                let shared = self.inner.kind_lines.all().map(|l| l.waiting(&keys));
                self.inner.lines.waiting(&keys)
                    + shared.sum::<usize>()
                    + self.inner.fair.waiting(&keys)
                    + self.inner.fair_sends.waiting(&keys)
            }
            Err(_) => 0,
        }
    }

    /// Number of local lines open: one per key whose plain lock a task of
    /// this Locker holds or waits for, one per key and kind a task waits
    /// for (reads, writes, permits, segments), and one per key with fair
    /// requests.
    pub fn local_lines(&self) -> usize {
        let shared: usize = self.inner.kind_lines.all().map(|l| l.open_lines()).sum();
        self.inner.lines.open_lines() + shared + self.inner.fair.open()
    }
}

impl fmt::Debug for Locker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Locker")
            .field("backend", &self.inner.backend.describe())
            .field("config", &self.inner.config)
            .finish()
    }
}
