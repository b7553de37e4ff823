//! [`TestStore`]: one lock store (memory or a real Redis) that hands out
//! several Lockers, as if each were another process.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lock_core::backend::{Attempt, Claim, MemoryBackend, RedisBackend, ReleaseSignal, StoreFuture};
use lock_core::{Backend, LockError, Locker, LockerBuilder, StoreError, StoredKeys};

use crate::{RedisServer, SentinelSet};

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

    /// The server, for Redis stores (inspected over plain TCP).
    pub fn server(&self) -> Option<&RedisServer> {
        match self {
            TestStore::Redis(server) | TestStore::RedisTls(server) => Some(server),
            TestStore::Sentinel(set) => Some(set.first_master()),
            TestStore::Memory(_) => None,
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
        let backend: Arc<dyn Backend> = match self {
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
            TestStore::Redis(_) | TestStore::RedisTls(_) | TestStore::Sentinel(_) => {
                let server = self.server().expect("a Redis store");
                let mut conn = server.connection().await;
                let kinds = [keys.fair(), keys.rw(), keys.permits(), keys.segments()];
                let removed: u64 = redis::cmd("DEL")
                    .arg(keys.lease())
                    .arg(&kinds)
                    .query_async(&mut conn)
                    .await
                    .expect("DEL");
                assert!(removed >= 1, "no lease to delete");
            }
        }
    }
}

/// A backend wrapper that counts the store requests a Locker makes (the
/// store behaviour is the wrapped backend's own).
#[derive(Clone)]
pub struct Counting {
    inner: Arc<dyn Backend>,
    acquires: Arc<tokio::sync::watch::Sender<u64>>,
    renewals: Arc<AtomicU64>,
    releases: Arc<AtomicU64>,
}

impl Counting {
    fn new(inner: Arc<dyn Backend>) -> Self {
        Counting {
            inner,
            acquires: Arc::new(tokio::sync::watch::channel(0).0),
            renewals: Arc::default(),
            releases: Arc::default(),
        }
    }

    /// Acquire attempts so far.
    pub fn acquires(&self) -> u64 {
        *self.acquires.borrow()
    }

    /// Waits until at least `n` acquire attempts have been made (an event,
    /// not a sleep: the attempt counter is a watch channel).
    pub async fn acquires_reach(&self, n: u64) {
        let mut seen = self.acquires.subscribe();
        seen.wait_for(|&count| count >= n)
            .await
            .expect("counter alive");
    }

    /// Renewals so far.
    pub fn renewals(&self) -> u64 {
        self.renewals.load(Ordering::SeqCst)
    }

    /// Releases so far.
    pub fn releases(&self) -> u64 {
        self.releases.load(Ordering::SeqCst)
    }
}

impl Backend for Counting {
    fn supports(&self, claim: Claim) -> bool {
        self.inner.supports(claim)
    }

    fn try_acquire<'a>(
        &'a self,
        keys: &'a StoredKeys,
        claim: Claim,
        owner: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<Attempt, StoreError>> {
        // Counted once answered, so a waiter seen at n attempts has its
        // answers in hand; an answer given in place stays in place.
        let attempt = match self.inner.try_acquire(keys, claim, owner, ttl).into_ready() {
            Ok(outcome) => {
                self.acquires.send_modify(|n| *n += 1);
                return StoreFuture::ready(outcome);
            }
            Err(attempt) => attempt,
        };
        let acquires = Arc::clone(&self.acquires);
        StoreFuture::new(async move {
            let outcome = attempt.await;
            acquires.send_modify(|n| *n += 1);
            outcome
        })
    }

    fn renew<'a>(
        &'a self,
        keys: &'a StoredKeys,
        claim: Claim,
        owner: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        self.renewals.fetch_add(1, Ordering::SeqCst);
        self.inner.renew(keys, claim, owner, ttl)
    }

    fn release<'a>(
        &'a self,
        keys: &'a StoredKeys,
        claim: Claim,
        owner: &'a str,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        self.releases.fetch_add(1, Ordering::SeqCst);
        self.inner.release(keys, claim, owner)
    }

    fn subscribe<'a>(
        &'a self,
        keys: &'a StoredKeys,
        claim: Claim,
        ticket: Option<&'a str>,
    ) -> StoreFuture<'a, Result<ReleaseSignal, StoreError>> {
        self.inner.subscribe(keys, claim, ticket)
    }

    fn confirm_replicas<'a>(
        &'a self,
        keys: &'a StoredKeys,
        claim: Claim,
        owner: &'a str,
        ttl: Duration,
        wanted: usize,
        within: Duration,
    ) -> StoreFuture<'a, Result<usize, StoreError>> {
        let inner = &self.inner;
        inner.confirm_replicas(keys, claim, owner, ttl, wanted, within)
    }

    fn answers_in_place(&self) -> bool {
        self.inner.answers_in_place()
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}

/// Asserts that `result` is a lost-lease error.
pub fn assert_lost<T: std::fmt::Debug>(result: Result<T, LockError>) {
    match result {
        Err(LockError::Lost { .. }) => {}
        other => panic!("expected LockError::Lost, got {other:?}"),
    }
}
