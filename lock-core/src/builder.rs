//! [`LockerBuilder`]: the settings of a [`Locker`](crate::Locker); the
//! constructors that finish it, one per store, are in `connect.rs`.

use std::time::Duration;

use crate::backend::stored_keys::validate_namespace;
use crate::error::LockError;
use crate::locker::{Config, MIN_TTL};

/// Builds a [`Locker`](crate::Locker) with non-default settings.
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
    /// Roots (PEM) a `rediss://` server's certificate is checked against
    /// instead of the system's: a connect setting, not the Locker's.
    #[cfg(feature = "tls")]
    pub(crate) tls_roots: Option<std::sync::Arc<[u8]>>,
}

impl LockerBuilder {
    pub(crate) fn new() -> Self {
        LockerBuilder {
            config: Config::default(),
            #[cfg(feature = "tls")]
            tls_roots: None,
        }
    }

    /// Checks the certificate of a `rediss://` server, or of a PostgreSQL
    /// server reached with `sslmode=require`, against these root
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
        self.tls_roots = Some(std::sync::Arc::from(pem.into()));
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

    /// Bound on tasks of this process waiting in one key's local queue
    /// (default 100 000; a key's plain lock, reads, writes, semaphore and
    /// striped lock each have a queue); past it, acquires fail at once with
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
    /// failover would forget. A failover keeps the lock only if the replica
    /// it promotes has it: ask for as many replicas as may be promoted
    /// (with one of two confirmed, promoting the other loses the lock).
    /// `WAIT` occupies the shared connection while it waits, so keep
    /// `within` short.
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
}
