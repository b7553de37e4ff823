//! Every way to a Locker on a store: by URL scheme
//! ([`LockerBuilder::connect`], [`LockerBuilder::from_env`]), and one
//! constructor per store (memory, Redis and its topologies, RedLock, etcd,
//! ZooKeeper, or any [`LockStore`](crate::backend::LockStore)).

use std::sync::Arc;

#[cfg(feature = "etcd")]
use crate::backend::EtcdBackend;
#[cfg(feature = "mysql")]
use crate::backend::MysqlBackend;
#[cfg(feature = "postgres")]
use crate::backend::PostgresBackend;
#[cfg(feature = "zookeeper")]
use crate::backend::ZooKeeperBackend;
use crate::backend::stored_keys::StoredKeys;
use crate::backend::{LockStore, MemoryBackend};
#[cfg(feature = "redis")]
use crate::backend::{RedLockBackend, RedisBackend};
use crate::builder::LockerBuilder;
use crate::error::{LockError, Operation};
use crate::error::{Refusal, StoreError};
use crate::kind::LockKind;
use crate::locker::{Config, Locker, MIN_TTL};

impl Locker {
    /// A Locker on the store `url` names, with default settings: Redis
    /// (`redis://`, `rediss://`, `redis+unix://`, `redis+sentinel://`,
    /// `redis+cluster://`), etcd (`etcd://`, feature `etcd`) or ZooKeeper
    /// (`zk://`, feature `zookeeper`). See [`LockerBuilder::connect`].
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// let url = std::env::var("LOCK_URL").unwrap_or("redis://127.0.0.1:6379".into());
    /// let locker = lock_core::Locker::connect(&url).await?;
    /// # let _ = locker;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect(url: &str) -> Result<Locker, LockError> {
        Locker::builder().connect(url).await
    }

    /// The store at `LOCK_URL` (any scheme [`connect`](Self::connect)
    /// takes), else Redis at `REDIS_URL`, else the memory backend with a
    /// logged warning (locks then hold within this process only).
    pub async fn from_env() -> Result<Locker, LockError> {
        Locker::builder().from_env().await
    }
}

impl LockerBuilder {
    /// A Locker on the store `url` names: the scheme picks the backend, so
    /// code that takes a URL from configuration does not change with the
    /// store.
    ///
    /// - `redis://`, `rediss://`, `redis+unix://`, `redis+sentinel://`,
    ///   `redis+cluster://`: Redis, as [`redis`](Self::redis);
    /// - `etcd://[user:password@]host:port[,host:port...]`: etcd, as
    ///   `etcd` (feature `etcd`);
    /// - `zk://host:port[,host:port...][/chroot]`: ZooKeeper, as
    ///   `zookeeper` (feature `zookeeper`);
    /// - `postgres://` or `postgresql://`: PostgreSQL, as `postgres`
    ///   (feature `postgres`);
    /// - `mysql://` or `mariadb://`: MySQL or MariaDB, as `mysql` (feature
    ///   `mysql`).
    ///
    /// Another scheme, or one whose feature is off, is
    /// [`UnsupportedScheme`](LockError::UnsupportedScheme).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// let locker = lock_core::Locker::builder()
    ///     .connect("etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379")
    ///     .await?;
    /// # let _ = locker;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect(self, url: &str) -> Result<Locker, LockError> {
        let Some((scheme, _)) = url.split_once("://") else {
            let source = StoreError::refused(
                Refusal::InvalidUrl,
                format!(
                    "`{url}` names no scheme: write redis://, etcd://, zk://, postgres:// or \
                     mysql://"
                ),
            );
            return Err(LockError::InvalidUrl { source });
        };
        match scheme {
            "etcd" => self.etcd_url(url).await,
            "zk" => self.zookeeper_url(url).await,
            "postgres" | "postgresql" => self.postgres_url(url).await,
            "mysql" | "mariadb" => self.mysql_url(url).await,
            _ if scheme.starts_with("redis") => self.redis_url(url).await,
            _ => {
                let source = StoreError::refused(
                    Refusal::UnsupportedScheme(scheme.to_owned()),
                    format!("no lock store is reached through `{scheme}://`"),
                );
                let scheme = scheme.to_owned();
                Err(LockError::UnsupportedScheme { scheme, source })
            }
        }
    }

    /// A Locker on the etcd members at `endpoints` (`http://host:port`; one
    /// reachable member is enough). Every kind of lock runs on it, granted
    /// in arrival order; the fencing token is the revision of the write that
    /// granted it. A ttl is whole seconds, at least etcd's minimum (2 s
    /// by default): a lock asking for less is granted that, which its guard
    /// says ([`LockGuard::ttl`](crate::LockGuard::ttl)). See
    /// [`EtcdBackend`] for how locks are kept there.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// let members = ["http://10.0.0.1:2379", "http://10.0.0.2:2379", "http://10.0.0.3:2379"];
    /// let locker = lock_core::Locker::builder().etcd(&members).await?;
    /// # let _ = locker;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "etcd")]
    pub async fn etcd(self, endpoints: &[&str]) -> Result<Locker, LockError> {
        let config = self.validated()?;
        let connect = EtcdBackend::connect(endpoints, config.timeout).await;
        Self::checked(connect, config).await
    }

    #[cfg(feature = "etcd")]
    async fn etcd_url(self, url: &str) -> Result<Locker, LockError> {
        let config = self.validated()?;
        let connect = EtcdBackend::connect_url(url, config.timeout).await;
        Self::checked(connect, config).await
    }

    #[cfg(not(feature = "etcd"))]
    async fn etcd_url(self, _url: &str) -> Result<Locker, LockError> {
        Err(feature_off("etcd", "etcd"))
    }

    #[cfg(feature = "redis")]
    async fn redis_url(self, url: &str) -> Result<Locker, LockError> {
        self.redis(url).await
    }

    #[cfg(not(feature = "redis"))]
    async fn redis_url(self, url: &str) -> Result<Locker, LockError> {
        let scheme = url.split_once("://").map_or("redis", |(scheme, _)| scheme);
        Err(feature_off(scheme, "redis"))
    }

    /// A Locker on the ZooKeeper ensemble `connect_string` names
    /// (`host:port[,host:port...][/chroot]`; one reachable server is
    /// enough). Every kind of lock runs on it, granted in arrival order;
    /// the fencing token is the zxid of a write to the lock's node at its
    /// grant. The lease is a
    /// session (one per ttl): its timeout, as the server agrees to it, is
    /// the ttl granted ([`LockGuard::ttl`](crate::LockGuard::ttl)). See
    /// [`ZooKeeperBackend`].
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// let locker = lock_core::Locker::builder()
    ///     .zookeeper("10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181/locks")
    ///     .await?;
    /// # let _ = locker;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "zookeeper")]
    pub async fn zookeeper(self, connect_string: &str) -> Result<Locker, LockError> {
        let config = self.validated()?;
        let connect = ZooKeeperBackend::connect(connect_string, config.timeout).await;
        Self::checked(connect, config).await
    }

    #[cfg(feature = "zookeeper")]
    async fn zookeeper_url(self, url: &str) -> Result<Locker, LockError> {
        let config = self.validated()?;
        let connect = ZooKeeperBackend::connect_url(url, config.timeout).await;
        Self::checked(connect, config).await
    }

    #[cfg(not(feature = "zookeeper"))]
    async fn zookeeper_url(self, _url: &str) -> Result<Locker, LockError> {
        Err(feature_off("zk", "zookeeper"))
    }

    /// A Locker on the PostgreSQL database `url` names
    /// (`postgres://[user[:password]@]host[:port]/database`): leases are rows
    /// of a table in a schema named after the namespace, made on first
    /// connect (see [`PostgresBackend`](crate::backend::PostgresBackend)).
    /// Keeps every kind of lock. With `sslmode=require` in the URL it
    /// connects over TLS (feature `tls`), checking the server's certificate
    /// against the system's roots or those of
    /// [`tls_root_certificates`](Self::tls_root_certificates).
    ///
    /// Errors as [`redis`](Self::redis): a wrong password is
    /// [`AuthenticationFailed`](LockError::AuthenticationFailed), a missing
    /// database [`InvalidUrl`](LockError::InvalidUrl), a role without the
    /// rights [`PermissionDenied`](LockError::PermissionDenied), tables of
    /// another format [`UnknownFormat`](LockError::UnknownFormat).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// let locker = lock_core::Locker::builder()
    ///     .postgres("postgres://app:secret@db.internal/app")
    ///     .await?;
    /// # let _ = locker;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "postgres")]
    pub async fn postgres(self, url: &str) -> Result<Locker, LockError> {
        #[cfg(feature = "tls")]
        let tls_roots = self.tls_roots.clone();
        let config = self.validated()?;
        let longest = PostgresBackend::MAX_NAMESPACE_LEN;
        if config.namespace.len() > longest {
            let why = format!("PostgreSQL keeps schema names of at most {longest} bytes");
            return Err(LockError::invalid_config("namespace", why));
        }
        let (namespace, timeout) = (&config.namespace, config.timeout);
        #[cfg(feature = "tls")]
        let connect = match &tls_roots {
            Some(roots) => PostgresBackend::connect_tls(url, namespace, timeout, roots).await,
            None => PostgresBackend::connect(url, namespace, timeout).await,
        };
        #[cfg(not(feature = "tls"))]
        let connect = PostgresBackend::connect(url, namespace, timeout).await;
        Self::checked(connect, config).await
    }

    #[cfg(feature = "postgres")]
    async fn postgres_url(self, url: &str) -> Result<Locker, LockError> {
        self.postgres(url).await
    }

    #[cfg(not(feature = "postgres"))]
    async fn postgres_url(self, _url: &str) -> Result<Locker, LockError> {
        Err(feature_off("postgres", "postgres"))
    }

    /// A Locker on the MySQL (8.0 and later) or MariaDB (10.6 and later)
    /// database `url` names (`mysql://[user[:password]@]host[:port]/database`):
    /// leases are rows of tables named after the namespace, made on first
    /// connect (see [`MysqlBackend`](crate::backend::MysqlBackend)). Keeps
    /// every kind of lock.
    ///
    /// Errors as [`postgres`](Self::postgres): a wrong password is
    /// [`AuthenticationFailed`](LockError::AuthenticationFailed), a missing
    /// one [`PasswordRequired`](LockError::PasswordRequired), a missing
    /// database [`InvalidUrl`](LockError::InvalidUrl), a user without the
    /// rights [`PermissionDenied`](LockError::PermissionDenied), tables of
    /// another format [`UnknownFormat`](LockError::UnknownFormat).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// let locker = lock_core::Locker::builder()
    ///     .mysql("mysql://app:secret@db.internal/app")
    ///     .await?;
    /// # let _ = locker;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "mysql")]
    pub async fn mysql(self, url: &str) -> Result<Locker, LockError> {
        let config = self.validated()?;
        let longest = MysqlBackend::MAX_NAMESPACE_LEN;
        if config.namespace.len() > longest {
            let why = format!("a MySQL store's table names leave it at most {longest} bytes");
            return Err(LockError::invalid_config("namespace", why));
        }
        let url = match url.strip_prefix("mariadb://") {
            Some(rest) => format!("mysql://{rest}"),
            None => url.to_owned(),
        };
        let connect = MysqlBackend::connect(&url, &config.namespace, config.timeout).await;
        Self::checked(connect, config).await
    }

    #[cfg(feature = "mysql")]
    async fn mysql_url(self, url: &str) -> Result<Locker, LockError> {
        self.mysql(url).await
    }

    #[cfg(not(feature = "mysql"))]
    async fn mysql_url(self, _url: &str) -> Result<Locker, LockError> {
        Err(feature_off("mysql", "mysql"))
    }

    /// The store at `LOCK_URL` when it is set (any scheme
    /// [`connect`](Self::connect) takes), else Redis at `REDIS_URL`, else
    /// the memory backend with a logged warning. A store that is named but
    /// cannot be reached is an error, not a silent fallback.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// // LOCK_URL=etcd://10.0.0.1:2379,10.0.0.2:2379 in the environment
    /// let locker = lock_core::Locker::builder().namespace("billing").from_env().await?;
    /// # let _ = locker;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn from_env(self) -> Result<Locker, LockError> {
        let named = |name| {
            std::env::var(name)
                .ok()
                .filter(|url| !url.trim().is_empty())
        };
        if let Some(url) = named("LOCK_URL") {
            return self.connect(url.trim()).await;
        }
        if let Some(url) = named("REDIS_URL") {
            return self.redis_url(url.trim()).await;
        }
        tracing::warn!(
            "neither LOCK_URL nor REDIS_URL is set: locks use the in-process backend and hold within this process only"
        );
        self.memory()
    }

    /// A Locker on the embedded in-process backend.
    pub fn memory(self) -> Result<Locker, LockError> {
        let config = self.validated()?;
        Ok(Locker::from_parts(Arc::new(MemoryBackend::new()), config))
    }

    /// A Locker on any [`LockStore`].
    pub fn backend(self, backend: impl LockStore) -> Result<Locker, LockError> {
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
    #[cfg(feature = "redis")]
    pub async fn redis(self, url: &str) -> Result<Locker, LockError> {
        #[cfg(feature = "tls")]
        let tls_roots = self.tls_roots.clone();
        let config = self.validated()?;
        #[cfg(feature = "tls")]
        let connect = match &tls_roots {
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
    #[cfg(feature = "redis")]
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
    #[cfg(feature = "redis")]
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
    #[cfg(feature = "redis")]
    pub async fn redlock(self, urls: &[&str]) -> Result<Locker, LockError> {
        let config = self.validated()?;
        let connect = RedLockBackend::connect(urls, config.timeout).await;
        Self::checked(connect, config).await
    }

    /// The Locker over a Redis backend just connected, once one round trip
    /// has checked the connection as a lock would use it.
    #[cfg_attr(
        not(any(
            feature = "redis",
            feature = "etcd",
            feature = "zookeeper",
            feature = "postgres",
            feature = "mysql"
        )),
        allow(dead_code)
    )]
    pub(crate) async fn checked(
        connect: Result<impl LockStore, StoreError>,
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
                LockKind::Exclusive,
                "lock-core:connection-check",
                MIN_TTL,
            )
            .await
            .map_err(|err| failed(err.unknown(false)))?;
        tracing::info!(backend = %backend.describe(), namespace = %config.namespace, "locker connected");
        Ok(Locker::from_parts(Arc::new(backend), config))
    }
}

/// The error for a URL of `scheme` in a build without lock-core's
/// `feature`.
#[cfg(any(
    not(feature = "etcd"),
    not(feature = "zookeeper"),
    not(feature = "postgres"),
    not(feature = "mysql")
))]
fn feature_off(scheme: &str, feature: &str) -> LockError {
    let source = StoreError::refused(
        Refusal::UnsupportedScheme(scheme.to_owned()),
        format!("this build has no {feature} backend: turn on lock-core's `{feature}` feature"),
    );
    let scheme = scheme.to_owned();
    LockError::UnsupportedScheme { scheme, source }
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
    #[cfg(feature = "redis")]
    pub async fn redis(url: &str) -> Result<Locker, LockError> {
        Locker::builder().redis(url).await
    }

    /// A builder for namespace, defaults, timeouts and bounds.
    pub fn builder() -> LockerBuilder {
        LockerBuilder::new()
    }
}
