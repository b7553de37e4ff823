//! Choosing a store: [`LockerBuilder::connect`] by URL scheme,
//! [`LockerBuilder::etcd`], [`LockerBuilder::zookeeper`] and
//! [`LockerBuilder::from_env`].

#[cfg(feature = "etcd")]
use crate::backend::EtcdBackend;
#[cfg(feature = "zookeeper")]
use crate::backend::ZooKeeperBackend;
use crate::builder::LockerBuilder;
use crate::error::LockError;
use crate::locker::Locker;
use crate::store_error::{Refusal, StoreError};

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
    ///   [`etcd`](Self::etcd) (feature `etcd`);
    /// - `zk://host:port[,host:port...][/chroot]`: ZooKeeper, as
    ///   [`zookeeper`](Self::zookeeper) (feature `zookeeper`).
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
                format!("`{url}` names no scheme: write redis://, etcd:// or zk://"),
            );
            return Err(LockError::InvalidUrl { source });
        };
        match scheme {
            "etcd" => self.etcd_url(url).await,
            "zk" => self.zookeeper_url(url).await,
            _ if scheme.starts_with("redis") => self.redis(url).await,
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
            return self.redis(url.trim()).await;
        }
        tracing::warn!(
            "neither LOCK_URL nor REDIS_URL is set: locks use the in-process backend and hold within this process only"
        );
        self.memory()
    }
}

/// The error for a URL of `scheme` in a build without lock-core's
/// `feature`.
#[cfg(any(not(feature = "etcd"), not(feature = "zookeeper")))]
fn feature_off(scheme: &str, feature: &str) -> LockError {
    let source = StoreError::refused(
        Refusal::UnsupportedScheme(scheme.to_owned()),
        format!("this build has no {feature} backend: turn on lock-core's `{feature}` feature"),
    );
    let scheme = scheme.to_owned();
    LockError::UnsupportedScheme { scheme, source }
}
