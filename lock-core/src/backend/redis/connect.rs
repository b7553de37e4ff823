//! Connecting: to one server by URL, or to the master a set of sentinels
//! names.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::batch::Batcher;
use super::connection::{Endpoint, RedisConnection};
use super::pubsub::Hub;
use super::sentinel::{SentinelMaster, SentinelUrl};
use super::slots::SlotMasters;
use super::wait::{Masters, WaitConnections};
use super::{Publish, RedisBackend, bounded};
use crate::error::{Refusal, StoreError};

impl RedisBackend<RedisConnection> {
    /// Connects to the server at `url` (`redis://host:port/db`,
    /// `redis+unix:///path`; `rediss://` with feature `tls`), bounding
    /// connects and requests by `timeout`.
    ///
    /// A URL that does not parse, a scheme this build cannot connect with
    /// (`rediss://` without feature `tls`) and rejected credentials are
    /// [refusals](StoreError::refusal), not transient errors.
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// use lock_core::Locker;
    /// use lock_core::backend::RedisBackend;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let backend = RedisBackend::connect("redis://10.0.0.5:6379/0", Duration::from_secs(2)).await?;
    /// let locker = Locker::builder().label("billing").backend(backend)?;
    /// # let _ = locker;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        Self::connect_with(url, timeout, None).await
    }

    /// Connects to the master that the sentinels at `sentinels` (`redis://`
    /// URLs, each with the credentials of that sentinel, if any) name
    /// `master`, and follows it through failovers: a broken connection or a
    /// `READONLY` answer has the sentinels asked again. The master is
    /// reached without credentials; for a master with a password use the
    /// `redis+sentinel://` URL form with [`connect`](Self::connect).
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// use lock_core::backend::RedisBackend;
    ///
    /// # async fn run() -> Result<(), lock_core::StoreError> {
    /// let sentinels = ["redis://10.0.0.7:26379", "redis://10.0.0.8:26379"];
    /// let backend =
    ///     RedisBackend::connect_sentinel("locks", &sentinels, Duration::from_secs(2)).await?;
    /// # let _ = backend;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect_sentinel(
        master: &str,
        sentinels: &[&str],
        timeout: Duration,
    ) -> Result<Self, StoreError> {
        let url = SentinelUrl {
            sentinels: sentinels.iter().map(|s| s.to_string()).collect(),
            master: master.to_owned(),
            login: redis::RedisConnectionInfo::default(),
        };
        Self::follow_sentinels(&url, timeout).await
    }

    /// Connects to the Redis Cluster that the nodes at `nodes` (`redis://`
    /// URLs; one reachable node is enough, the others are found) belong
    /// to. Each request goes to the master of its key's slot (a lock's
    /// keys share one slot), `MOVED` and `ASK` answers are followed, and a
    /// failover or a slot that moves is followed when the cluster says so.
    /// Requests are not batched (one call cannot span slots). Releases are
    /// published with `SPUBLISH` and waiters listen with `SSUBSCRIBE` on
    /// the node of the lock's slot (Redis 7 or newer); `WAIT` goes to the
    /// slot's master on a connection of its own.
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// use lock_core::backend::RedisBackend;
    ///
    /// # async fn run() -> Result<(), lock_core::StoreError> {
    /// let nodes = ["redis://10.0.1.1:7000", "redis://10.0.1.2:7000"];
    /// let backend = RedisBackend::connect_cluster(&nodes, Duration::from_secs(2)).await?;
    /// # let _ = backend;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect_cluster(nodes: &[&str], timeout: Duration) -> Result<Self, StoreError> {
        for url in nodes {
            open(url, None)?;
        }
        let Some(first) = nodes.first() else {
            return Err(StoreError::refused(
                Refusal::InvalidUrl,
                "no cluster node given",
            ));
        };
        let invalid = |err| StoreError::refused(Refusal::InvalidUrl, err);
        let client = redis::cluster::ClusterClient::builder(nodes.to_vec())
            .connection_timeout(timeout)
            .build()
            .map_err(invalid)?;
        let connection = bounded(timeout, client.get_async_connection())
            .await
            .map_err(|err| err.unknown(false))?;
        refuse_before_redis_7(&connection, timeout).await?;
        let nodes: Vec<String> = nodes.iter().map(|node| node.to_string()).collect();
        let slots = SlotMasters::new(connection.clone(), first, timeout)?;
        Ok(RedisBackend {
            connection: RedisConnection::cluster(connection),
            batcher: None,
            waits: Some(WaitConnections::new(Masters::Slots(Box::new(slots)))),
            hub: Some(Hub::shard(&nodes, timeout)?),
            timeout,
            description: format!("redis cluster (through {})", nodes.join(", ")),
            publish: Publish::Sharded,
        })
    }

    async fn follow_sentinels(url: &SentinelUrl, timeout: Duration) -> Result<Self, StoreError> {
        let master = SentinelMaster::new(url, timeout)?;
        // The first resolution, so that a wrong name or no sentinel is an
        // error here.
        let current = master.current().await.map_err(|err| {
            if err.kind() == redis::ErrorKind::MasterNameNotFoundBySentinel {
                let sentinels = url.sentinels.join(", ");
                let why = format!("no sentinel of {sentinels} names a master `{}`", url.master);
                return StoreError::not_applied(why);
            }
            StoreError::from(err).unknown(false)
        })?;
        let description = format!(
            "redis sentinel master {} (now {})",
            master.name(),
            current.client.get_connection_info().addr()
        );
        let connection = RedisConnection::sentinel(Arc::clone(&master));
        Ok(Self::assemble(
            connection,
            Endpoint::Sentinel(master),
            timeout,
            description,
        ))
    }

    /// The same backend sending each request in a call of its own: a
    /// request given up on is then never followed by a give-back of its
    /// own (RedLock gives back on every master itself, in order).
    pub(crate) fn without_batching(mut self) -> Self {
        self.batcher = None;
        self
    }

    /// The backend over `connection`, batching, with pub/sub and `WAIT`
    /// connections to `endpoint`.
    fn assemble(
        connection: RedisConnection,
        endpoint: Endpoint,
        timeout: Duration,
        description: String,
    ) -> Self {
        RedisBackend {
            batcher: Some(Batcher::new(connection.clone(), timeout)),
            connection,
            waits: Some(WaitConnections::new(Masters::Endpoint(endpoint.clone()))),
            hub: Some(Hub::plain(endpoint, timeout)),
            timeout,
            description,
            publish: Publish::Plain,
        }
    }

    /// As [`connect`](Self::connect), for `rediss://` URLs checking the
    /// server's certificate against `roots` (PEM) instead of the system's
    /// (feature `tls`).
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// use lock_core::backend::RedisBackend;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let roots = std::fs::read("/etc/locks/redis-ca.pem")?;
    /// let url = "rediss://redis.internal:6380";
    /// let backend = RedisBackend::connect_tls(url, Duration::from_secs(2), &roots).await?;
    /// # let _ = backend;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tls")]
    pub async fn connect_tls(
        url: &str,
        timeout: Duration,
        roots: &[u8],
    ) -> Result<Self, StoreError> {
        Self::connect_with(url, timeout, Some(roots)).await
    }

    async fn connect_with(
        url: &str,
        timeout: Duration,
        roots: Option<&[u8]>,
    ) -> Result<Self, StoreError> {
        if let Some(nodes) = cluster_nodes(url)? {
            if roots.is_some() {
                let refusal = Refusal::UnsupportedScheme("redis+cluster".to_owned());
                let reason = "TLS to a cluster is not supported yet: leave out the TLS roots";
                return Err(StoreError::refused(refusal, reason));
            }
            let nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();
            return Self::connect_cluster(&nodes, timeout).await;
        }
        if is_sentinel(url) {
            if roots.is_some() {
                let refusal = Refusal::UnsupportedScheme("redis+sentinel".to_owned());
                let reason = "TLS through Sentinel is not supported: leave out the TLS roots, \
                              or connect to the master with rediss://";
                return Err(StoreError::refused(refusal, reason));
            }
            return Self::follow_sentinels(&SentinelUrl::parse(url)?, timeout).await;
        }
        let client = open(url, roots)?;
        // Responses are bounded per request by `send_or_resend` instead (WAIT needs
        // a longer bound than the others).
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(None)
            .set_number_of_retries(2)
            .set_max_delay(timeout);
        let connect = ConnectionManager::new_with_config(client.clone(), config);
        let connection = tokio::time::timeout(timeout, connect)
            .await
            .map_err(|_| StoreError::not_applied(format!("could not connect within {timeout:?}")))?
            .map_err(|err| StoreError::from(err).unknown(false))?;
        let description = format!("redis {}", client.get_connection_info().addr());
        let connection = RedisConnection::server(connection);
        Ok(Self::assemble(
            connection,
            Endpoint::Server(Box::new(client)),
            timeout,
            description,
        ))
    }
}

/// Refuses a cluster whose nodes run Redis before 7.0, which has no
/// sharded pub/sub (every release with a waiter would fail). A node that
/// does not let this user read `INFO` is not checked.
async fn refuse_before_redis_7(
    connection: &redis::cluster_async::ClusterConnection,
    timeout: Duration,
) -> Result<(), StoreError> {
    use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
    let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
    let mut connection = connection.clone();
    let info = connection.route_command(redis::cmd("INFO").arg("server").clone(), routing);
    let Ok(Ok(info)) = tokio::time::timeout(timeout, info).await else {
        return Ok(());
    };
    let Ok(info) = redis::from_redis_value::<String>(info) else {
        return Ok(());
    };
    let version = info
        .lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .unwrap_or_default();
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(7);
    if major < 7 {
        return Err(StoreError::permanent(format!(
            "Redis Cluster needs Redis 7.0 or newer (sharded pub/sub); a node runs {version}"
        )));
    }
    Ok(())
}

/// A client for `url`, or the refusal that says what is wrong with it.
fn open(url: &str, roots: Option<&[u8]>) -> Result<redis::Client, StoreError> {
    // Checked here, not left to redis-rs: another crate of the build may
    // turn on its TLS (features unify), and `rediss://` would then panic
    // in rustls without a crypto provider.
    if let Some((scheme, _)) = url.split_once("://")
        && !SCHEMES.contains(&scheme.to_ascii_lowercase().as_str())
    {
        let refusal = Refusal::UnsupportedScheme(scheme.to_owned());
        let reason = format!("lock-core connects over {}", SCHEMES.join(", "));
        return Err(StoreError::refused(refusal, reason));
    }
    let invalid = |err| StoreError::refused(Refusal::InvalidUrl, err);
    #[cfg(feature = "tls")]
    {
        // The first provider installed for the process stays; ours is ring.
        let _ = rustls::crypto::ring::default_provider().install_default();
        if let Some(roots) = roots {
            let certificates = redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(roots.to_vec()),
            };
            return redis::Client::build_with_tls(url, certificates).map_err(invalid);
        }
    }
    let _ = roots;
    redis::Client::open(url).map_err(invalid)
}

/// URL schemes this build connects with.
#[cfg(not(feature = "tls"))]
const SCHEMES: &[&str] = &[
    "redis",
    "valkey",
    "redis+unix",
    "valkey+unix",
    "unix",
    "redis+sentinel",
    "redis+cluster",
];

/// URL schemes this build connects with (TLS ones included).
#[cfg(feature = "tls")]
const SCHEMES: &[&str] = &[
    "redis",
    "valkey",
    "redis+unix",
    "valkey+unix",
    "unix",
    "rediss",
    "valkeys",
    "redis+sentinel",
    "redis+cluster",
];

/// Whether `url` names a master through its sentinels.
fn is_sentinel(url: &str) -> bool {
    url.split_once("://")
        .is_some_and(|(scheme, _)| scheme.eq_ignore_ascii_case("redis+sentinel"))
}

/// The nodes of a `redis+cluster://[user:password@]host:port[,host:port...]`
/// URL, as `redis://` URLs (`None` for another scheme).
fn cluster_nodes(url: &str) -> Result<Option<Vec<String>>, StoreError> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Ok(None);
    };
    if !scheme.eq_ignore_ascii_case("redis+cluster") {
        return Ok(None);
    }
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    if !path.is_empty() || authority.contains(['?', '#']) {
        let reason = "a cluster URL names nodes only: redis+cluster://[user:password@]host:port[,host:port...]";
        return Err(StoreError::refused(Refusal::InvalidUrl, reason));
    }
    let (login, hosts) = match authority.rsplit_once('@') {
        Some((login, hosts)) => (format!("{login}@"), hosts),
        None => (String::new(), authority),
    };
    let nodes: Vec<String> = hosts
        .split(',')
        .filter(|host| !host.is_empty())
        .map(|host| format!("redis://{login}{host}"))
        .collect();
    if nodes.is_empty() {
        let reason = "no node in redis+cluster://host:port[,host:port...]";
        return Err(StoreError::refused(Refusal::InvalidUrl, reason));
    }
    Ok(Some(nodes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_urls_name_their_nodes() {
        let nodes = cluster_nodes("redis+cluster://u:p@a:1,b:2")
            .unwrap()
            .unwrap();
        assert_eq!(nodes, ["redis://u:p@a:1", "redis://u:p@b:2"]);
        assert!(cluster_nodes("redis://a:1").unwrap().is_none());
        for bad in [
            "redis+cluster://",
            "redis+cluster://a:1/0",
            "redis+cluster://a:1?x=1",
        ] {
            let err = cluster_nodes(bad).unwrap_err();
            assert_eq!(err.refusal(), Some(&Refusal::InvalidUrl), "{bad}");
        }
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(10_000))]

            #[test]
            fn any_cluster_url_parses_or_is_refused_without_panicking(url in "(redis\\+cluster|redis)://[a-z0-9:@%/,?#]{0,40}") {
                if let Ok(Some(nodes)) = cluster_nodes(&url) {
                    prop_assert!(!nodes.is_empty());
                    prop_assert!(nodes.iter().all(|n| n.starts_with("redis://")));
                }
            }

            #[test]
            fn cluster_nodes_are_read_back(hosts in proptest::collection::vec(("[a-z][a-z0-9.-]{0,12}", 1u16..), 1..6)) {
                let list: Vec<String> = hosts.iter().map(|(h, p)| format!("{h}:{p}")).collect();
                let nodes = cluster_nodes(&format!("redis+cluster://{}", list.join(","))).unwrap().unwrap();
                let expected: Vec<String> = list.iter().map(|h| format!("redis://{h}")).collect();
                prop_assert_eq!(nodes, expected);
            }
        }
    }
}
