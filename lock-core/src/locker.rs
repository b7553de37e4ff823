//! [`Locker`] and its [`LockerBuilder`]: a backend plus defaults.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::LockGuard;
use crate::backend::{Backend, Claim, MemoryBackend, RedisBackend};
use crate::error::{LockError, Operation};
use crate::keys::{StoredKeys, validate_namespace};
use crate::line::Lines;
use crate::multi::LockAllRequest;
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
    pub(crate) lines: Arc<Lines>,
    pub(crate) watchdogs: Watchdogs,
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

    /// Redis at `REDIS_URL` when it is set, else the memory backend with a
    /// logged warning (locks then hold within this process only).
    pub async fn from_env() -> Result<Locker, LockError> {
        Locker::builder().from_env().await
    }

    /// A builder for namespace, defaults, timeouts and bounds.
    pub fn builder() -> LockerBuilder {
        LockerBuilder {
            config: Config::default(),
        }
    }

    fn from_parts(backend: Arc<dyn Backend>, config: Config) -> Locker {
        Locker {
            inner: Arc::new(LockerInner {
                id: NEXT_LOCKER_ID.fetch_add(1, Ordering::Relaxed),
                lines: Lines::new(config.max_waiters_per_key),
                watchdogs: Watchdogs::default(),
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
            Ok(keys) => self.inner.lines.waiting(&keys),
            Err(_) => 0,
        }
    }

    /// Number of keys this Locker currently holds or waits for.
    pub fn local_lines(&self) -> usize {
        self.inner.lines.open_lines()
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

/// Builds a [`Locker`] with non-default settings.
///
/// ```
/// use lock_core::Locker;
/// use std::time::Duration;
///
/// let locker = Locker::builder()
///     .namespace("billing")
///     .ttl(Duration::from_secs(10))
///     .wait(Duration::from_secs(2))
///     .max_hold(Duration::from_secs(600))
///     .memory()
///     .unwrap();
/// assert_eq!(locker.namespace(), "billing");
/// ```
#[derive(Debug, Clone)]
pub struct LockerBuilder {
    config: Config,
}

impl LockerBuilder {
    /// Prefix of every stored key (default `lock`): `A-Za-z0-9-_.:/`.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.config.namespace = namespace.into();
        self
    }

    /// Default lease length (default 30 s, at least 30 ms). The watchdog
    /// renews every ttl/3; a holder that stops renewing loses the lock
    /// within one ttl.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.config.ttl = ttl;
        self
    }

    /// Default bound on waiting for a held lock (default 10 s; zero: try
    /// once).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.config.wait = wait;
        self
    }

    /// Whether leases are renewed while held (default `true`).
    pub fn watchdog(mut self, watchdog: bool) -> Self {
        self.config.watchdog = watchdog;
        self
    }

    /// Stop renewing a lease once it has been held this long (default: no
    /// bound); the lease then runs out within one ttl and is reported lost.
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.config.max_hold = Some(max_hold);
        self
    }

    /// Bound on tasks of this process waiting for one key (default
    /// 100 000); past it, acquires fail at once with
    /// [`LockError::TooManyWaiters`].
    pub fn max_waiters_per_key(mut self, max: usize) -> Self {
        self.config.max_waiters_per_key = max;
        self
    }

    /// Bound on connecting and on each store request (default 2 s), a
    /// second send after a broken connection included. A request that runs
    /// out of it may have been applied; an acquire then releases by owner
    /// value in the background. A waiting acquire goes on through store
    /// errors (a restart, a cut connection) until the store has failed for
    /// this long, then fails with [`LockError::Unavailable`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.config.timeout = timeout;
        self
    }

    /// After each acquisition, wait up to `within` for `replicas` replicas
    /// to have it (Redis `WAIT`); if fewer confirm, release and fail with
    /// [`LockError::ReplicasNotConfirmed`] rather than hold a lock that a
    /// failover would forget. `WAIT` occupies the shared connection while
    /// it waits, so keep `within` short.
    pub fn replicas(mut self, replicas: usize, within: Duration) -> Self {
        self.config.replicas = Some((replicas, within));
        self
    }

    fn validated(self) -> Result<Config, LockError> {
        let config = self.config;
        validate_namespace(&config.namespace)?;
        if config.ttl < MIN_TTL {
            return Err(LockError::invalid_config(
                "ttl",
                format!(
                    "{:?} is shorter than the minimum of {MIN_TTL:?}",
                    config.ttl
                ),
            ));
        }
        if config.max_waiters_per_key == 0 {
            return Err(LockError::invalid_config(
                "max_waiters_per_key",
                "must be at least 1",
            ));
        }
        if config.timeout.is_zero() {
            return Err(LockError::invalid_config("timeout", "must be above zero"));
        }
        Ok(config)
    }

    /// A Locker on the embedded in-process backend.
    pub fn memory(self) -> Result<Locker, LockError> {
        let config = self.validated()?;
        Ok(Locker::from_parts(Arc::new(MemoryBackend::new()), config))
    }

    /// A Locker on any [`Backend`].
    pub fn backend(self, backend: impl Backend) -> Result<Locker, LockError> {
        let config = self.validated()?;
        Ok(Locker::from_parts(Arc::new(backend), config))
    }

    /// A Locker on the Redis server at `url`.
    ///
    /// One round trip checks the connection as a lock would use it (a
    /// lock script on a key of the namespace), so that what no retry fixes
    /// is an error here, not at the first lock:
    /// [`InvalidUrl`](LockError::InvalidUrl),
    /// [`UnsupportedScheme`](LockError::UnsupportedScheme),
    /// [`AuthenticationFailed`](LockError::AuthenticationFailed),
    /// [`PasswordRequired`](LockError::PasswordRequired) and
    /// [`PermissionDenied`](LockError::PermissionDenied). A server that
    /// cannot be reached within the timeout is
    /// [`Unavailable`](LockError::Unavailable).
    pub async fn redis(self, url: &str) -> Result<Locker, LockError> {
        let config = self.validated()?;
        let failed = |err| LockError::from_store("*", Operation::Connect, err);
        let backend = RedisBackend::connect(url, config.timeout)
            .await
            .map_err(failed)?;
        // Renewing a lease nobody holds changes nothing and answers `false`;
        // it runs what every lock runs (a script on the namespace's keys).
        let probe = StoredKeys::new(&config.namespace, "lock-core:connection-check")?;
        backend
            .renew(
                &probe,
                Claim::Exclusive,
                "lock-core:connection-check",
                MIN_TTL,
            )
            .await
            .map_err(|err| failed(err.unknown(false)))?;
        tracing::info!(backend = %backend.describe(), namespace = %config.namespace, "locker connected");
        Ok(Locker::from_parts(Arc::new(backend), config))
    }

    /// Redis at `REDIS_URL` when it is set (an unreachable server is an
    /// error, not a silent fallback), else the memory backend with a logged
    /// warning.
    pub async fn from_env(self) -> Result<Locker, LockError> {
        match std::env::var("REDIS_URL") {
            Ok(url) if !url.trim().is_empty() => self.redis(url.trim()).await,
            _ => {
                tracing::warn!(
                    "REDIS_URL is not set: locks use the in-process backend and hold within this process only"
                );
                self.memory()
            }
        }
    }
}
