use std::time::Duration;

use lock_core::Locker;
use tower::Layer;

use super::{LockService, OnLost, Settings};
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
}

impl<K, R> LockLayer<K, R> {
    /// Lease length (default: the Locker's).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.settings.ttl = Some(ttl);
        self
    }

    /// How long a request waits for a held lock before it is rejected
    /// (default: the Locker's; zero: try once).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.settings.wait = Some(wait);
        self
    }

    /// What happens when the lease is lost while the handler runs.
    pub fn on_lost(mut self, on_lost: OnLost) -> Self {
        self.settings.on_lost = on_lost;
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
