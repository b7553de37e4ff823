use std::time::Duration;

use lock_core::{LockKind, Locker};
use tower::Layer;

use super::{LockService, Mode, OnLost, Reads, Settings, safe_methods_read};
use crate::rejection::{DefaultRejection, Reject};

/// Locks each request on a key derived from it; see the
/// [module docs](crate::lock).
///
/// ```
/// use lock_core::Locker;
/// use lock_tower::{KeyFrom, LockLayer, OnLost};
/// use std::time::Duration;
///
/// let layer = LockLayer::new(Locker::memory(), KeyFrom::path("/orders/{id}/pay", "order:<id>"))
///     .ttl(Duration::from_secs(30))
///     .wait(Duration::from_secs(2))
///     .on_lost(OnLost::Abort);
/// # let _ = layer;
/// ```
#[derive(Debug, Clone)]
pub struct LockLayer<K, R = DefaultRejection> {
    locker: Locker,
    extractor: K,
    settings: Settings,
    reject: R,
}

impl<K> LockLayer<K> {
    /// A layer that locks with `locker` on the keys `extractor` derives.
    pub fn new(locker: Locker, extractor: K) -> Self {
        LockLayer {
            locker,
            extractor,
            settings: Settings::default(),
            reject: DefaultRejection,
        }
    }

    /// A layer that takes the read lock of the key for requests with a
    /// safe method (GET, HEAD, OPTIONS) and the write lock for the others
    /// (see [`Locker::read_lock`]): reads of one resource run side by side,
    /// a write runs alone, and a waiting write keeps new reads out.
    /// [`reads_when`](Self::reads_when) changes which requests read (a
    /// gRPC service, whose calls are all POSTs, decides by path).
    ///
    /// ```
    /// use lock_core::Locker;
    /// use lock_tower::{KeyFrom, LockLayer};
    ///
    /// let layer = LockLayer::read_write(Locker::memory(), KeyFrom::path("/docs/{id}", "doc:<id>"));
    /// # let _ = layer;
    /// ```
    pub fn read_write(locker: Locker, extractor: K) -> Self {
        let reads = safe_methods_read;
        LockLayer::new(locker, extractor).mode(Mode::ReadWrite { reads })
    }
}

impl<K, R> LockLayer<K, R> {
    /// Lease length (default: the Locker's).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.settings.options.ttl = Some(ttl);
        self
    }

    /// How long a request waits for a held lock before it is rejected
    /// (default: the Locker's; zero: try once). Ignored by a layer that
    /// [skips](Self::if_held_skip).
    pub fn wait(mut self, wait: Duration) -> Self {
        if self.settings.skips {
            return self;
        }
        self.settings.options.wait = Some(wait);
        self
    }

    /// Never waits: a request whose lock is held is answered at once with
    /// [`Rejection::Skipped`](crate::Rejection::Skipped) (by default `409
    /// Conflict`, gRPC `ALREADY_EXISTS`; [`rejection`](Self::rejection)
    /// replaces it), and its handler does not run. For work that one
    /// replica of many should do, such as a job a scheduler triggers over
    /// HTTP on every replica.
    ///
    /// ```
    /// use lock_core::Locker;
    /// use lock_tower::{KeyFrom, LockLayer};
    /// use std::time::Duration;
    ///
    /// let layer = LockLayer::new(Locker::memory(), KeyFrom::path("/jobs/{name}", "job:<name>"))
    ///     .if_held_skip()
    ///     .hold_at_least(Duration::from_secs(60));
    /// # let _ = layer;
    /// ```
    pub fn if_held_skip(mut self) -> Self {
        self.settings.skips = true;
        self.settings.options.wait = Some(Duration::ZERO);
        self
    }

    /// Keeps each request's lease at least `hold` after it was taken, even
    /// if the handler is done sooner (see
    /// [`LockRequest::hold_at_least`](lock_core::LockRequest::hold_at_least)).
    ///
    /// ```
    /// use lock_core::Locker;
    /// use lock_tower::{KeyFrom, LockLayer};
    /// use std::time::Duration;
    ///
    /// // A trigger sent to every replica runs the job once a minute at most.
    /// let layer = LockLayer::new(Locker::memory(), KeyFrom::path("/jobs/{name}", "job:<name>"))
    ///     .if_held_skip()
    ///     .hold_at_least(Duration::from_secs(60));
    /// # let _ = layer;
    /// ```
    pub fn hold_at_least(mut self, hold: Duration) -> Self {
        self.settings.options.hold_at_least = Some(hold);
        self
    }

    /// What happens when the lease is lost while the handler runs.
    pub fn on_lost(mut self, on_lost: OnLost) -> Self {
        self.settings.on_lost = on_lost;
        self
    }

    /// Takes fair locks ([`Locker::fair_lock`]): requests for one key are
    /// served in the order they reached the store, across replicas. It
    /// replaces a read-write split: the last of `fair`, `read_write` and
    /// `reads_when` decides.
    pub fn fair(self) -> Self {
        self.mode(Mode::Every(LockKind::Fair))
    }

    /// Takes the read lock for the requests `reads` accepts and the write
    /// lock for the others, as [`read_write`](LockLayer::read_write).
    ///
    /// ```
    /// use lock_core::Locker;
    /// use lock_tower::{KeyFrom, LockLayer};
    ///
    /// // gRPC: every call is a POST; the `Get*` methods read.
    /// let layer = LockLayer::new(Locker::memory(), KeyFrom::header("x-account").prefix("account:"))
    ///     .reads_when(|_, uri| uri.path().rsplit('/').next().is_some_and(|m| m.starts_with("Get")));
    /// # let _ = layer;
    /// ```
    pub fn reads_when(self, reads: Reads) -> Self {
        self.mode(Mode::ReadWrite { reads })
    }

    fn mode(mut self, mode: Mode) -> Self {
        self.settings.mode = mode;
        self
    }

    /// Replaces the answers to rejected requests.
    pub fn rejection<R2: Reject>(self, reject: R2) -> LockLayer<K, R2> {
        LockLayer {
            locker: self.locker,
            extractor: self.extractor,
            settings: self.settings,
            reject,
        }
    }
}

impl<S, K: Clone, R: Clone> Layer<S> for LockLayer<K, R> {
    type Service = LockService<S, K, R>;

    fn layer(&self, inner: S) -> Self::Service {
        LockService::new(
            inner,
            self.locker.clone(),
            self.extractor.clone(),
            self.settings,
            self.reject.clone(),
        )
    }
}
