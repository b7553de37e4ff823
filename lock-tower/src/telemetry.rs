//! Metrics through the `metrics` facade (feature `metrics`); no-ops
//! without it.
//!
//! | metric | kind | what it counts |
//! |---|---|---|
//! | `lock_fence_refused_total{check="request"}` | counter | requests refused for a stale token (`409`), below the floor included (lock-core counts its fenced writes' refusals as `check="write"`) |
//! | `lock_fence_forgotten_total` | counter | resources a full [`NewestTokens`](crate::NewestTokens) forgot |
//! | `lock_fence_below_floor_total` | counter | tokens refused for being at or below the floor of forgotten ones |
//! | `lock_fence_bad_signature_total` | counter | requests refused for a missing, malformed or forged signature |

#[cfg(feature = "metrics")]
pub(crate) fn refused() {
    metrics::counter!("lock_fence_refused_total", "check" => "request").increment(1);
}

#[cfg(feature = "metrics")]
pub(crate) fn forgotten(resources: usize) {
    metrics::counter!("lock_fence_forgotten_total").increment(resources as u64);
}

#[cfg(feature = "metrics")]
pub(crate) fn below_floor() {
    metrics::counter!("lock_fence_below_floor_total").increment(1);
}

#[cfg(feature = "metrics")]
pub(crate) fn bad_signature() {
    metrics::counter!("lock_fence_bad_signature_total").increment(1);
}

#[cfg(not(feature = "metrics"))]
pub(crate) fn refused() {}

#[cfg(not(feature = "metrics"))]
pub(crate) fn forgotten(_resources: usize) {}

#[cfg(not(feature = "metrics"))]
pub(crate) fn below_floor() {}

#[cfg(not(feature = "metrics"))]
pub(crate) fn bad_signature() {}
