//! [`LockerBuilder`]: a [`Locker`] with non-default settings.

use std::sync::Arc;
use std::time::Duration;

use crate::backend::{Backend, Claim, MemoryBackend, RedLockBackend, RedisBackend};
use crate::error::{LockError, Operation};
use crate::keys::{StoredKeys, validate_namespace};
use crate::locker::{Config, Locker, MIN_TTL};
use crate::store_error::StoreError;

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
    pub(crate) fn new() -> Self {
        LockerBuilder {
            config: Config::default(),
        }
    }

    /// Checks the certificate of a `rediss://` server against these root
    /// certificates (PEM, one or more) instead of the system's: for a
    /// private certificate authority (feature `tls`).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// let ca = std::fs::read("/etc/redis/ca.crt").expect("the CA certificate");
    /// let locker = lock_core::Locker::builder()
    ///     .tls_root_certificates(ca)
    ///     .redis("rediss://:password@redis.internal:6380")
    ///     .await?;
    /// # let _ = locker;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tls")]
    pub fn tls_root_certificates(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.config.tls_roots = Some(Arc::from(pem.into()));
        self
    }

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

    /// Names this Locker's lock holders for operators: every owner value
    /// starts with it, and [`Locker::inspect`](crate::Locker::inspect)
    /// shows it as `<label>/pid <pid>`. 1 to 32 ASCII letters, digits, `.`,
    /// `_` or `-`; the host name by default.
    ///
    /// ```
    /// let locker = lock_core::Locker::builder().label("payments-7f9c").memory()?;
    /// # let _ = locker;
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.config.label = label.into();
        self
    }

    /// Bound on tasks of this process waiting in one key's local line
    /// (default 100 000; a key's plain lock, reads, writes, semaphore and
    /// striped lock each have a line); past it, acquires fail at once with
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

    pub(crate) fn validated(self) -> Result<Config, LockError> {
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
        if !crate::owner::check_label(&config.label) {
            return Err(LockError::invalid_config(
                "label",
                format!(
                    "{:?} must be 1 to 32 ASCII letters, digits, `.`, `_` or `-`",
                    config.label.chars().take(64).collect::<String>()
                ),
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
    ///
    /// `redis+sentinel://[user:password@]host:port[,host:port...]/master[/db]`
    /// connects through Sentinel, as [`redis_sentinel`](Self::redis_sentinel)
    /// does, with the credentials and database for the master.
    pub async fn redis(self, url: &str) -> Result<Locker, LockError> {
        let config = self.validated()?;
        #[cfg(feature = "tls")]
        let connect = match &config.tls_roots {
            Some(roots) => RedisBackend::connect_tls(url, config.timeout, roots).await,
            None => RedisBackend::connect(url, config.timeout).await,
        };
        #[cfg(not(feature = "tls"))]
        let connect = RedisBackend::connect(url, config.timeout).await;
        Self::checked(connect, config).await
    }

    /// A Locker on the Redis master that the sentinels at `sentinels`
    /// (`redis://host:port` URLs) know as `master`, following it through
    /// failovers: after a failover the next request asks the sentinels
    /// again and goes to the new master.
    ///
    /// Errors as [`redis`](Self::redis); a master name no sentinel knows is
    /// [`Unavailable`](LockError::Unavailable), naming it. Each sentinel URL
    /// may carry that sentinel's credentials; the master is reached without
    /// any: for a master with a password, use
    /// the `redis+sentinel://` URL form with [`redis`](Self::redis).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// let sentinels = ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379", "redis://10.0.0.3:26379"];
    /// let locker = lock_core::Locker::builder()
    ///     .redis_sentinel("mymaster", &sentinels)
    ///     .await?;
    /// # let _ = locker;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn redis_sentinel(
        self,
        master: &str,
        sentinels: &[&str],
    ) -> Result<Locker, LockError> {
        let config = self.validated()?;
        let connect = RedisBackend::connect_sentinel(master, sentinels, config.timeout).await;
        Self::checked(connect, config).await
    }

    /// A Locker on the Redis Cluster that the nodes at `nodes` (`redis://`
    /// URLs; one reachable node is enough) belong to, as
    /// `redis+cluster://host:port,host:port` does with
    /// [`redis`](Self::redis). Every kind of lock runs on it (a lock's keys
    /// share one slot), and so does [`replicas`](Self::replicas) (`WAIT` on
    /// the slot's master). Waiters listen on the shard channel of their
    /// lock (`SSUBSCRIBE`, Redis 7 or newer).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// let nodes = ["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"];
    /// let locker = lock_core::Locker::builder().redis_cluster(&nodes).await?;
    /// # let _ = locker;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn redis_cluster(self, nodes: &[&str]) -> Result<Locker, LockError> {
        let config = self.validated()?;
        let connect = RedisBackend::connect_cluster(nodes, config.timeout).await;
        Self::checked(connect, config).await
    }

    /// A Locker on RedLock over the independent Redis masters at `urls`
    /// (at least 3; 5 is usual): a lease is held when a majority of them
    /// hold it, and tokens strictly increase per key even when the
    /// masters' clocks disagree (see
    /// [`RedLockBackend`](crate::backend::RedLockBackend)). Only the plain
    /// lock and [`lock_all`](Locker::lock_all) run on it; the other kinds
    /// are [`Unsupported`](LockError::Unsupported).
    ///
    /// A quorum of the masters must answer now; the others are tried again
    /// on later requests.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// let masters = ["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"];
    /// let locker = lock_core::Locker::builder().redlock(&masters).await?;
    /// # let _ = locker;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn redlock(self, urls: &[&str]) -> Result<Locker, LockError> {
        let config = self.validated()?;
        let connect = RedLockBackend::connect(urls, config.timeout).await;
        Self::checked(connect, config).await
    }

    /// The Locker over a Redis backend just connected, once one round trip
    /// has checked the connection as a lock would use it.
    pub(crate) async fn checked(
        connect: Result<impl Backend, StoreError>,
        config: Config,
    ) -> Result<Locker, LockError> {
        let failed = |err| LockError::from_store("*", Operation::Connect, err);
        let backend = connect.map_err(failed)?;
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
}

/// The shortest ways to a Locker, and the way to the builder.
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
}
