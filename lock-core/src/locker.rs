//! [`Locker`]: a store plus defaults, and what its requests share: the
//! local queues, the fair places and the watchdogs. The requests it makes
//! are in `request/` and `multi.rs`, its constructors in `connect.rs`.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::backend::LockStore;
use crate::backend::stored_keys::StoredKeys;
use crate::error::LockError;
use crate::fair_waiters::FairWaiters;
use crate::kind::LockKind;
use crate::lease::watchdog::Watchdogs;
use crate::local_queue::LocalQueues;
use crate::owner::OwnerPrefix;

/// Default lease length.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);
/// Default bound on connecting and on each store request.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);
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
/// pub/sub connection and the process-local wait queues.
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
    inner: Arc<LockerInner>,
}

struct LockerInner {
    id: u64,
    backend: Arc<dyn LockStore>,
    config: Config,
    /// The start of every owner value this Locker makes.
    owner_prefix: OwnerPrefix,
    queues: Arc<LocalQueues>,
    kind_queues: KindQueues,
    /// The fair requests, which do not queue locally: each asks the store at once.
    fair: Arc<FairWaiters>,
    /// The queues that send fair requests' first tries one at a time per
    /// key, in call order.
    fair_sends: Arc<LocalQueues>,
    watchdogs: Watchdogs,
}

/// What the acquisition path and the requests read of a Locker.
impl Locker {
    /// Tells this Locker apart from the others of the process (a task's
    /// scope is reentrant per Locker).
    pub(crate) fn id(&self) -> u64 {
        self.inner.id
    }

    pub(crate) fn backend(&self) -> &Arc<dyn LockStore> {
        &self.inner.backend
    }

    pub(crate) fn config(&self) -> &Config {
        &self.inner.config
    }

    pub(crate) fn owner_prefix(&self) -> &OwnerPrefix {
        &self.inner.owner_prefix
    }

    /// The local queues of the plain lock.
    pub(crate) fn plain_queues(&self) -> &Arc<LocalQueues> {
        &self.inner.queues
    }

    /// The local queues that `kind` waits in (a fair request waits in none:
    /// see [`fair_places`](Self::fair_places)).
    pub(crate) fn queues_of(&self, kind: LockKind) -> &Arc<LocalQueues> {
        let queues = &self.inner.kind_queues;
        match kind {
            LockKind::Read => &queues.read,
            LockKind::Write => &queues.write,
            LockKind::Permit { .. } => &queues.permits,
            LockKind::Segment { .. } => &queues.segments,
            _ => &self.inner.queues,
        }
    }

    /// The places of the fair requests, which do not queue locally: each asks the
    /// store at once.
    pub(crate) fn fair_places(&self) -> &Arc<FairWaiters> {
        &self.inner.fair
    }

    /// The queues that send fair requests' first tries one at a time per
    /// key, in call order.
    pub(crate) fn fair_sends(&self) -> &Arc<LocalQueues> {
        &self.inner.fair_sends
    }

    pub(crate) fn watchdogs(&self) -> &Watchdogs {
        &self.inner.watchdogs
    }
}

/// The local queues of the kinds of lock other than the plain and the fair
/// lock, one per kind (reads and writes apart, so that a writer is not held
/// back in its process behind a waiting reader). In each, one
/// task at a time asks the store and hands the front on once granted, so
/// that the next asks at once: readers share; a writer behind another (or
/// behind a reader) of its own Locker marks the key in the store for
/// itself, and readers of other Lockers do not pass it.
struct KindQueues {
    read: Arc<LocalQueues>,
    write: Arc<LocalQueues>,
    permits: Arc<LocalQueues>,
    segments: Arc<LocalQueues>,
}

impl KindQueues {
    fn new(max_waiters_per_key: usize) -> Self {
        let queue = || LocalQueues::new(max_waiters_per_key);
        KindQueues {
            read: queue(),
            write: queue(),
            permits: queue(),
            segments: queue(),
        }
    }

    fn all(&self) -> impl Iterator<Item = &Arc<LocalQueues>> {
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
            timeout: DEFAULT_TIMEOUT,
            replicas: None,
            label: crate::owner::default_label(),
        }
    }
}

impl Locker {
    pub(crate) fn from_parts(backend: Arc<dyn LockStore>, config: Config) -> Locker {
        Locker {
            inner: Arc::new(LockerInner {
                id: NEXT_LOCKER_ID.fetch_add(1, Ordering::Relaxed),
                queues: LocalQueues::new(config.max_waiters_per_key),
                kind_queues: KindQueues::new(config.max_waiters_per_key),
                fair: FairWaiters::new(config.max_waiters_per_key),
                fair_sends: LocalQueues::new(config.max_waiters_per_key),
                watchdogs: Watchdogs::default(),
                owner_prefix: OwnerPrefix::new(&config.label),
                backend,
                config,
            }),
        }
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
    pub fn check_key(&self, key: impl AsRef<str>) -> Result<(), LockError> {
        crate::backend::stored_keys::validate(key.as_ref())
    }

    /// The names the lock on `key` is stored under (feature `test-util`).
    #[cfg(feature = "test-util")]
    pub fn stored_keys(&self, key: impl AsRef<str>) -> Result<StoredKeys, LockError> {
        StoredKeys::new(&self.inner.config.namespace, key.as_ref())
    }

    /// Tasks of this Locker waiting in the local queue for `key` behind the
    /// one that holds or is taking it (for load shedding and metrics).
    pub fn local_waiters(&self, key: impl AsRef<str>) -> usize {
        match StoredKeys::new(&self.inner.config.namespace, key.as_ref()) {
            Ok(keys) => {
                let shared = self.inner.kind_queues.all().map(|l| l.waiting(&keys));
                self.inner.queues.waiting(&keys)
                    + shared.sum::<usize>()
                    + self.inner.fair.waiting(&keys)
                    + self.inner.fair_sends.waiting(&keys)
            }
            Err(_) => 0,
        }
    }

    /// Number of local queues open: one per key whose plain lock a task of
    /// this Locker holds or waits for, one per key and kind a task waits
    /// for (reads, writes, permits, segments), and one per key with fair
    /// requests.
    #[cfg(any(test, feature = "test-util"))]
    pub fn local_queues(&self) -> usize {
        let shared: usize = self.inner.kind_queues.all().map(|l| l.open_queues()).sum();
        self.inner.queues.open_queues() + shared + self.inner.fair.open()
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
