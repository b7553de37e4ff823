//! [`TestStore`]: one lock store (memory or a real Redis) that hands out
//! several Lockers, as if each were another process.

use std::sync::Arc;
use std::time::Duration;

use lock_core::LockKind;
use lock_core::backend::{
    Attempt, EtcdBackend, MemoryBackend, MysqlBackend, PostgresBackend, RedLockBackend,
    RedisBackend, ReleaseSignal, StoreFuture, ZooKeeperBackend,
};
use lock_core::backend::{LockStore, Pattern, StoredKeys};
use lock_core::{ForceReleased, Inspection, LockError, Locker, LockerBuilder, StoreError};

use crate::{
    ClusterSet, EtcdServer, MysqlServer, PgBouncer, PostgresServer, RedisServer, SentinelSet,
    ZooKeeperServer,
};

/// A store under test.
pub enum TestStore {
    /// The in-process backend, shared by every Locker made from it.
    Memory(MemoryBackend),
    /// A real redis-server from the kit.
    Redis(RedisServer),
    /// A real redis-server from the kit, reached over TLS.
    RedisTls(RedisServer),
    /// A master and a sentinel from the kit, the Lockers finding the master
    /// through the sentinel (`redis+sentinel://`).
    Sentinel(SentinelSet),
    /// Independent redis-servers from the kit, the Lockers holding leases
    /// on a majority of them (RedLock).
    RedLock(Vec<RedisServer>),
    /// A Redis Cluster from the kit (3 masters, 3 replicas).
    Cluster(ClusterSet),
    /// A single etcd member from the kit.
    Etcd(EtcdServer),
    /// A standalone ZooKeeper server from the kit.
    ZooKeeper(ZooKeeperServer),
    /// A PostgreSQL server from the kit (leases in schema `lock`).
    Postgres(PostgresServer),
    /// A PostgreSQL server from the kit behind a transaction-pooling
    /// PgBouncer, the Lockers listening for releases on a direct
    /// connection (`listen_url`).
    PgBouncer(PgBouncer),
    /// A MariaDB server from the kit (leases in tables `lock_*`).
    Mysql(MysqlServer),
}

impl TestStore {
    /// The memory backend.
    pub fn memory() -> Self {
        TestStore::Memory(MemoryBackend::new())
    }

    /// A fresh redis-server.
    pub fn redis() -> Self {
        TestStore::Redis(RedisServer::start())
    }

    /// A fresh redis-server that the Lockers reach over TLS (`rediss://`,
    /// trusting the server's own certificate authority).
    pub fn redis_tls() -> Self {
        TestStore::RedisTls(RedisServer::options().tls().start())
    }

    /// A master without replicas and one sentinel watching it, which the
    /// Lockers reach through the sentinel (no failover: that is for tests
    /// of their own).
    pub fn sentinel() -> Self {
        TestStore::Sentinel(SentinelSet::start(0, 1))
    }

    /// Three independent redis-servers for RedLock.
    pub fn redlock() -> Self {
        TestStore::RedLock((0..3).map(|_| RedisServer::start()).collect())
    }

    /// A fresh Redis Cluster (3 masters, 3 replicas).
    pub fn cluster() -> Self {
        TestStore::Cluster(ClusterSet::start())
    }

    /// A fresh single-member etcd.
    pub fn etcd() -> Self {
        TestStore::Etcd(EtcdServer::start())
    }

    /// A fresh standalone ZooKeeper server.
    pub fn zookeeper() -> Self {
        TestStore::ZooKeeper(ZooKeeperServer::start())
    }

    /// A fresh PostgreSQL server.
    pub fn postgres() -> Self {
        TestStore::Postgres(PostgresServer::start())
    }

    /// A fresh PostgreSQL server behind a fresh PgBouncer.
    pub fn pgbouncer() -> Self {
        TestStore::PgBouncer(PgBouncer::start())
    }

    /// A fresh MariaDB server.
    pub fn mysql() -> Self {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        TestStore::Mysql(MysqlServer::start())
    }

    /// The PostgreSQL server that keeps the leases, if the store is one.
    pub fn postgres_server(&self) -> Option<&PostgresServer> {
        match self {
            TestStore::Postgres(server) => Some(server),
            TestStore::PgBouncer(bouncer) => Some(&bouncer.postgres),
            _ => None,
        }
    }

    /// Whether the store keeps every kind of lock (RedLock keeps the plain
    /// lock and the multi-lock over it only).
    pub fn keeps_the_family(&self) -> bool {
        !matches!(self, TestStore::RedLock(_))
    }

    /// Whether a waiter for a plain lock leaves a queue entry in the store
    /// (etcd, ZooKeeper: every lock is a queue), which giving up withdraws
    /// with a release.
    pub fn plain_locks_queue(&self) -> bool {
        matches!(self, TestStore::Etcd(_) | TestStore::ZooKeeper(_))
    }

    /// Whether a plain lock's waiter marks the holder's lease, so that
    /// an inspection tells that someone has waited (the Redis stores,
    /// PostgreSQL and MySQL).
    pub fn marks_plain_waiters(&self) -> bool {
        !matches!(
            self,
            TestStore::Memory(_) | TestStore::Etcd(_) | TestStore::ZooKeeper(_)
        )
    }

    /// How a process of its own reaches the store: the URL for
    /// [`Locker::connect`] and, over TLS, the file of the certificate
    /// authority to trust. `None` for the memory store (it lives in this
    /// process) and RedLock (reached through no URL).
    pub fn process_url(&self) -> Option<(String, Option<std::path::PathBuf>)> {
        let url = match self {
            TestStore::Memory(_) | TestStore::RedLock(_) => return None,
            TestStore::Redis(server) => server.url(),
            TestStore::RedisTls(server) => return Some((server.tls_url(), Some(server.ca_file()))),
            TestStore::Sentinel(set) => set.url(),
            TestStore::Cluster(cluster) => cluster.url(),
            TestStore::Etcd(member) => EtcdServer::url(std::slice::from_ref(member)),
            TestStore::ZooKeeper(server) => ZooKeeperServer::url(std::slice::from_ref(server)),
            TestStore::Postgres(server) => server.postgres_url(),
            TestStore::PgBouncer(bouncer) => bouncer.listening_url(),
            TestStore::Mysql(server) => server.mysql_url(),
        };
        Some((url, None))
    }

    /// The server, for Redis stores (inspected over plain TCP): the first
    /// master of RedLock.
    pub fn server(&self) -> Option<&RedisServer> {
        self.servers().first().copied()
    }

    /// Every server that holds leases (none for the memory store).
    pub fn servers(&self) -> Vec<&RedisServer> {
        match self {
            TestStore::Redis(server) | TestStore::RedisTls(server) => vec![server],
            TestStore::Sentinel(set) => vec![set.first_master()],
            TestStore::RedLock(masters) => masters.iter().collect(),
            TestStore::Cluster(cluster) => cluster.nodes().iter().collect(),
            TestStore::Memory(_)
            | TestStore::Etcd(_)
            | TestStore::ZooKeeper(_)
            | TestStore::Postgres(_)
            | TestStore::PgBouncer(_)
            | TestStore::Mysql(_) => vec![],
        }
    }

    /// Asserts that the store keeps nothing of any lock (a Redis server no
    /// lasting key, etcd no key at all, ZooKeeper no node), naming what is
    /// left.
    pub async fn assert_nothing_left(&self) {
        match self {
            TestStore::Etcd(member) => {
                let left = etcd_keys(member).await;
                assert!(left.is_empty(), "left behind in etcd: {left:?}");
            }
            TestStore::ZooKeeper(server) => zookeeper_empties(server).await,
            TestStore::Postgres(server)
            | TestStore::PgBouncer(PgBouncer {
                postgres: server, ..
            }) => {
                let left = postgres_live_leases(server).await;
                assert!(left.is_empty(), "live leases left in PostgreSQL: {left:?}");
            }
            TestStore::Mysql(server) => {
                let left = mysql_live_leases(server);
                assert!(left.is_empty(), "live leases left in MariaDB: {left:?}");
            }
            // Replicas follow their masters a moment later: the masters say
            // what the store keeps.
            TestStore::Cluster(cluster) => {
                let masters = cluster.master_ports().await;
                let nodes = cluster.nodes().iter();
                let masters = nodes.filter(|node| masters.contains(&node.port()));
                crate::assert_nothing_left(masters).await;
            }
            _ => crate::assert_nothing_left(self.servers()).await,
        }
    }

    /// A Locker with default settings and its own connection.
    pub async fn locker(&self) -> Locker {
        self.locker_with(|b| b).await.0
    }

    /// A Locker configured by `configure`, with a counter of the renewals
    /// its backend performs.
    pub async fn locker_with(
        &self,
        configure: impl FnOnce(LockerBuilder) -> LockerBuilder,
    ) -> (Locker, Counting) {
        let builder = configure(Locker::builder());
        let backend: Arc<dyn LockStore> = match self {
            TestStore::Memory(memory) => Arc::new(memory.clone()),
            TestStore::Redis(server) => Arc::new(
                RedisBackend::connect(&server.url(), Duration::from_secs(2))
                    .await
                    .expect("connect to the test server"),
            ),
            TestStore::RedisTls(server) => Arc::new(
                RedisBackend::connect_tls(
                    &server.tls_url(),
                    Duration::from_secs(2),
                    &server.ca_certificate(),
                )
                .await
                .expect("connect to the test server over TLS"),
            ),
            TestStore::Sentinel(set) => Arc::new(
                RedisBackend::connect(&set.url(), Duration::from_secs(2))
                    .await
                    .expect("connect through the test sentinel"),
            ),
            TestStore::Cluster(cluster) => Arc::new(
                RedisBackend::connect(&cluster.url(), Duration::from_secs(2))
                    .await
                    .expect("connect to the test cluster"),
            ),
            TestStore::Etcd(member) => Arc::new(
                EtcdBackend::connect(&[member.endpoint().as_str()], Duration::from_secs(2))
                    .await
                    .expect("connect to the test etcd"),
            ),
            TestStore::ZooKeeper(server) => Arc::new(
                ZooKeeperBackend::connect(&server.address(), Duration::from_secs(2))
                    .await
                    .expect("connect to the test ZooKeeper"),
            ),
            TestStore::Postgres(server) => Arc::new(
                PostgresBackend::connect(&server.postgres_url(), "lock", Duration::from_secs(2))
                    .await
                    .expect("connect to the test PostgreSQL"),
            ),
            TestStore::PgBouncer(bouncer) => Arc::new(
                PostgresBackend::connect(&bouncer.listening_url(), "lock", Duration::from_secs(2))
                    .await
                    .expect("connect through the test PgBouncer"),
            ),
            TestStore::Mysql(server) => Arc::new(
                MysqlBackend::connect(&server.mysql_url(), "lock", Duration::from_secs(2))
                    .await
                    .expect("connect to the test MariaDB"),
            ),
            TestStore::RedLock(masters) => {
                let urls: Vec<String> = masters.iter().map(RedisServer::url).collect();
                let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
                Arc::new(
                    RedLockBackend::connect(&urls, Duration::from_secs(2))
                        .await
                        .expect("connect to the RedLock masters"),
                )
            }
        };
        let counting = Counting::new(backend);
        let locker = builder
            .backend(counting.clone())
            .expect("valid test config");
        (locker, counting)
    }

    /// Removes every lease of `key` (of any kind) behind its holders' back.
    pub async fn steal(&self, locker: &Locker, key: &str) {
        let keys = locker.stored_keys(key).expect("valid key");
        match self {
            TestStore::Memory(memory) => {
                assert!(memory.evict(&keys), "no lease to evict");
            }
            TestStore::ZooKeeper(server) => {
                let client = zookeeper_client(server).await;
                let kinds = names_of_every_kind(&keys);
                let mut removed = 0;
                for kind in kinds {
                    let parent = format!("/{}", kind.replace('/', "%2F"));
                    let children = client.list_children(&parent).await.unwrap_or_default();
                    for child in children {
                        if client
                            .delete(&format!("{parent}/{child}"), None)
                            .await
                            .is_ok()
                        {
                            removed += 1;
                        }
                    }
                }
                assert!(removed >= 1, "no lease to delete");
            }
            TestStore::Postgres(server)
            | TestStore::PgBouncer(PgBouncer {
                postgres: server, ..
            }) => {
                let steal = "WITH a AS (DELETE FROM lock.leases WHERE name = ANY($1) RETURNING 1), \
                             b AS (DELETE FROM lock.holders WHERE name = ANY($1) RETURNING 1) \
                             SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b)";
                let client = server.client().await;
                let names = names_of_every_kind(&keys).to_vec();
                let removed = client.query_one(steal, &[&names]).await;
                let removed: i64 = removed.expect("delete in PostgreSQL").get(0);
                assert!(removed >= 1, "no lease to delete");
            }
            TestStore::Mysql(server) => {
                let names: Vec<String> = names_of_every_kind(&keys)
                    .iter()
                    .map(|name| format!("'{}'", name.replace('\\', "\\\\").replace('\'', "''")))
                    .collect();
                let names = names.join(", ");
                let steal = format!(
                    "DELETE FROM lock_leases WHERE name IN ({names}) AND owner <> ''; \
                     SELECT ROW_COUNT(); DELETE FROM lock_holders WHERE name IN ({names}); \
                     SELECT ROW_COUNT();"
                );
                let told = server.sql_as_root(&steal).expect("delete in MariaDB");
                let removed: i64 = told
                    .lines()
                    .filter_map(|n| n.trim().parse::<i64>().ok())
                    .sum();
                assert!(removed >= 1, "no lease to delete");
            }
            TestStore::Etcd(member) => {
                let mut client = etcd_client(member).await;
                let kinds = names_of_every_kind(&keys);
                let mut removed = 0;
                for kind in kinds {
                    let prefix = etcd_client::DeleteOptions::new().with_prefix();
                    let deleted = client.delete(format!("{kind}/"), Some(prefix)).await;
                    removed += deleted.expect("delete in etcd").deleted();
                }
                assert!(removed >= 1, "no lease to delete");
            }
            _ => {
                let [_, kinds @ ..] = names_of_every_kind(&keys);
                let mut removed = 0;
                for server in self.servers() {
                    let mut conn = server.connection().await;
                    // A cluster node that does not serve the slot says MOVED.
                    let gone: u64 = redis::cmd("DEL")
                        .arg(keys.lease())
                        .arg(&kinds)
                        .query_async(&mut conn)
                        .await
                        .unwrap_or(0);
                    removed += gone;
                }
                assert!(removed >= 1, "no lease to delete");
            }
        }
    }
}

/// A client of the test member `member`.
pub async fn etcd_client(member: &EtcdServer) -> etcd_client::Client {
    etcd_client::Client::connect([member.endpoint()], None)
        .await
        .expect("connect to the test etcd")
}

/// A client of the test server `server` (a session of its own).
pub async fn zookeeper_client(server: &ZooKeeperServer) -> zookeeper_client::Client {
    zookeeper_client::Client::connect(&server.address())
        .await
        .expect("connect to the test ZooKeeper")
}

/// Asserts that `server` keeps no lock node: its lock nodes are gone now,
/// and their parents (containers) within the seconds ZooKeeper takes to
/// remove empty ones.
/// The live leases and holders in the PostgreSQL of `server` (schema
/// `lock`), by name.
pub async fn postgres_live_leases(server: &PostgresServer) -> Vec<String> {
    let live = "SELECT name FROM lock.leases WHERE expires > clock_timestamp() \
                UNION ALL SELECT name || ' ' || owner FROM lock.holders \
                WHERE expires > clock_timestamp()";
    let rows = server.client().await.query(live, &[]).await;
    rows.map(|rows| rows.iter().map(|row| row.get(0)).collect())
        .unwrap_or_default()
}

/// The live leases and holders in the MariaDB of `server` (tables
/// `lock_*`), by name.
pub fn mysql_live_leases(server: &MysqlServer) -> Vec<String> {
    let live = "SELECT name FROM lock_leases WHERE expires > UTC_TIMESTAMP(6) \
                UNION ALL SELECT CONCAT(name, ' ', owner) FROM lock_holders \
                WHERE expires > UTC_TIMESTAMP(6)";
    let told = server.sql_as_root(live).unwrap_or_default();
    told.lines().map(str::to_owned).collect()
}

async fn zookeeper_empties(server: &ZooKeeperServer) {
    let client = zookeeper_client(server).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let (mut top, watcher) = client.list_and_watch_children("/").await.expect("list /");
        top.retain(|name| name != "zookeeper");
        for parent in &top {
            let children = client
                .list_children(&format!("/{parent}"))
                .await
                .unwrap_or_default();
            assert!(
                children.is_empty(),
                "left behind in ZooKeeper under /{parent}: {children:?}"
            );
        }
        if top.is_empty() {
            return;
        }
        let changed = tokio::time::timeout_at(deadline, watcher.changed()).await;
        assert!(changed.is_ok(), "empty parents left in ZooKeeper: {top:?}");
    }
}

/// Every key in the etcd of `member` but the marks that stop late puts
/// (`<namespace>:{<key>}:gone/...`): they lapse, with their lease or when
/// their Locker's reaper deletes them.
pub async fn etcd_keys(member: &EtcdServer) -> Vec<String> {
    let all = etcd_client::GetOptions::new().with_all_keys();
    let reply = etcd_client(member)
        .await
        .get("", Some(all))
        .await
        .expect("list etcd keys");
    reply
        .kvs()
        .iter()
        .map(|kv| (String::from_utf8_lossy(kv.key()).into_owned(), kv.lease()))
        .filter(|(key, lease)| !(*lease != 0 && key.contains("}:gone/")))
        .map(|(key, _)| key)
        .collect()
}

/// A backend wrapper that counts the store requests a Locker makes (the
/// store behaviour is the wrapped backend's own).
#[derive(Clone)]
pub struct Counting {
    inner: Arc<dyn LockStore>,
    acquires: Arc<tokio::sync::watch::Sender<u64>>,
    renewals: Arc<tokio::sync::watch::Sender<u64>>,
    releases: Arc<tokio::sync::watch::Sender<u64>>,
    /// Fair tries sent (counted as they leave, not once answered).
    fair_tries: Arc<tokio::sync::watch::Sender<u64>>,
    /// Holds one fair try back in this process (see
    /// [`hold_next_fair_try`](Counting::hold_next_fair_try)).
    gate: Arc<tokio::sync::watch::Sender<Gate>>,
}

/// Where the fair-try gate of a [`Counting`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    Open,
    /// The next fair try is held.
    Armed,
    /// A fair try is held until the gate opens.
    Holding,
}

impl Counting {
    /// Counts the requests made to `inner` (for a Locker on a store the
    /// kit reaches in its own way, such as through a [`DelayProxy`](crate::DelayProxy)).
    pub fn new(inner: Arc<dyn LockStore>) -> Self {
        Counting {
            inner,
            acquires: Arc::new(tokio::sync::watch::channel(0).0),
            renewals: Arc::new(tokio::sync::watch::channel(0).0),
            releases: Arc::new(tokio::sync::watch::channel(0).0),
            fair_tries: Arc::new(tokio::sync::watch::channel(0).0),
            gate: Arc::new(tokio::sync::watch::channel(Gate::Open).0),
        }
    }

    /// Holds the next fair try back in this process until
    /// [`open_gate`](Self::open_gate), as a slow connection would.
    pub fn hold_next_fair_try(&self) {
        self.gate.send_replace(Gate::Armed);
    }

    /// Lets the held fair try go on to the store.
    pub fn open_gate(&self) {
        self.gate.send_replace(Gate::Open);
    }

    /// Fair tries sent so far (the one held back too).
    pub fn fair_tries(&self) -> u64 {
        *self.fair_tries.borrow()
    }

    /// Waits until at least `n` fair tries have been sent.
    pub async fn fair_tries_reach(&self, n: u64) {
        reach(&self.fair_tries, n, "fair tries").await;
    }

    /// Acquire attempts so far.
    pub fn acquires(&self) -> u64 {
        *self.acquires.borrow()
    }

    /// Waits until at least `n` acquire attempts have been made (an event,
    /// not a sleep: the attempt counter is a watch channel).
    pub async fn acquires_reach(&self, n: u64) {
        reach(&self.acquires, n, "acquire attempts").await;
    }

    /// Renewals so far.
    pub fn renewals(&self) -> u64 {
        *self.renewals.borrow()
    }

    /// Waits until at least `n` renewals have been sent (a watch channel,
    /// like [`acquires_reach`](Self::acquires_reach)).
    pub async fn renewals_reach(&self, n: u64) {
        reach(&self.renewals, n, "renewals").await;
    }

    /// Releases answered so far (failed ones too).
    pub fn releases(&self) -> u64 {
        *self.releases.borrow()
    }

    /// Waits until at least `n` releases have been answered.
    pub async fn releases_reach(&self, n: u64) {
        reach(&self.releases, n, "releases").await;
    }
}

/// How long a wait for a count may take before the test fails: a broken
/// line that stops a count fails in seconds with a message, never as a hang.
pub const COUNT_BOUND: Duration = Duration::from_secs(60);

/// Waits until `count` reaches `n`, failing after [`COUNT_BOUND`].
async fn reach(count: &tokio::sync::watch::Sender<u64>, n: u64, what: &str) {
    let mut seen = count.subscribe();
    let reached = tokio::time::timeout(COUNT_BOUND, seen.wait_for(|&count| count >= n)).await;
    if reached.is_err() {
        let now = *count.borrow();
        panic!("{what}: {now} within {COUNT_BOUND:?}, not the {n} awaited");
    }
}

/// `request`, counted in `count` once the store has answered it.
fn answered<'a, T: Send + 'a>(
    request: StoreFuture<'a, T>,
    count: &Arc<tokio::sync::watch::Sender<u64>>,
) -> StoreFuture<'a, T> {
    match request.into_ready() {
        Ok(outcome) => {
            count.send_modify(|n| *n += 1);
            StoreFuture::ready(outcome)
        }
        Err(request) => {
            let count = Arc::clone(count);
            StoreFuture::new(async move {
                let outcome = request.await;
                count.send_modify(|n| *n += 1);
                outcome
            })
        }
    }
}

impl LockStore for Counting {
    fn supports(&self, kind: LockKind) -> bool {
        self.inner.supports(kind)
    }

    fn acquire<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<Attempt, StoreError>> {
        if kind == LockKind::Fair {
            self.fair_tries.send_modify(|n| *n += 1);
            let held = self.gate.send_if_modified(|gate| {
                let armed = *gate == Gate::Armed;
                if armed {
                    *gate = Gate::Holding;
                }
                armed
            });
            if held {
                // Asked only once the gate opens (a store in this process
                // would answer at the call).
                let mut gate = self.gate.subscribe();
                let inner = &self.inner;
                let attempt = StoreFuture::new(async move {
                    let _ = gate.wait_for(|gate| *gate == Gate::Open).await;
                    inner.acquire(keys, kind, owner, ttl).await
                });
                return answered(attempt, &self.acquires);
            }
        }
        // Counted once answered, so a waiter seen at n attempts has its
        // answers in hand; an answer given in place stays in place.
        answered(self.inner.acquire(keys, kind, owner, ttl), &self.acquires)
    }

    fn renew<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        self.renewals.send_modify(|n| *n += 1);
        self.inner.renew(keys, kind, owner, ttl)
    }

    fn release<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        // Counted once answered, like attempts: a release counted before an
        // error came back was made before it, not left to the background.
        answered(self.inner.release(keys, kind, owner), &self.releases)
    }

    fn subscribe<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        queued_owner: Option<&'a str>,
    ) -> StoreFuture<'a, Result<ReleaseSignal, StoreError>> {
        self.inner.subscribe(keys, kind, queued_owner)
    }

    fn announce<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
    ) -> StoreFuture<'a, Result<(), StoreError>> {
        self.inner.announce(keys, kind)
    }

    fn confirm_replicas<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
        wanted: usize,
        within: Duration,
    ) -> StoreFuture<'a, Result<usize, StoreError>> {
        let inner = &self.inner;
        inner.confirm_replicas(keys, kind, owner, ttl, wanted, within)
    }

    fn inspect<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> StoreFuture<'a, Result<Inspection, StoreError>> {
        self.inner.inspect(keys)
    }

    fn held_keys<'a>(
        &'a self,
        namespace: &'a str,
        pattern: &'a Pattern,
    ) -> StoreFuture<'a, Result<Vec<String>, StoreError>> {
        self.inner.held_keys(namespace, pattern)
    }

    fn force_release<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> StoreFuture<'a, Result<ForceReleased, StoreError>> {
        self.inner.force_release(keys)
    }

    fn answers_in_place(&self) -> bool {
        self.inner.answers_in_place()
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}

/// The stored name of every kind of lock on one key, the plain lock's first.
fn names_of_every_kind(keys: &StoredKeys) -> [String; 5] {
    [
        LockKind::Exclusive,
        LockKind::Fair,
        LockKind::Write,
        LockKind::Permit { of: 1 },
        LockKind::Segment { of: 1 },
    ]
    .map(|kind| keys.of_kind(kind))
}

/// Redis's token record of a lock (`<base>:fence`, as lock-core's
/// `backend/redis/keys.rs` lays it out).
pub fn token_record(keys: &StoredKeys) -> String {
    format!("{}:fence", keys.base())
}

/// Redis's release channel of a lock (`<base>:released`).
pub fn release_channel(keys: &StoredKeys) -> String {
    format!("{}:released", keys.base())
}

/// Asserts that `result` is a lost-lease error.
pub fn assert_lost<T: std::fmt::Debug>(result: Result<T, LockError>) {
    match result {
        Err(LockError::Lost { .. }) => {}
        other => panic!("expected LockError::Lost, got {other:?}"),
    }
}

/// `err` and each of its causes, joined by `: ` (as a log line would show
/// the chain).
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut chain = err.to_string();
    let mut cause = err.source();
    while let Some(inner) = cause {
        chain = format!("{chain}: {inner}");
        cause = inner.source();
    }
    chain
}
