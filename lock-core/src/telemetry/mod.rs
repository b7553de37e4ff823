//! Metrics through the `metrics` facade (feature `metrics`); no-ops
//! without it. Tracing events are emitted where things happen.
//!
//! | metric | kind | labels |
//! |---|---|---|
//! | `lock_acquired_total` | counter | `prefix` |
//! | `lock_wait_seconds` | histogram | `prefix` |
//! | `lock_wait_timeouts_total` | counter | `prefix` |
//! | `lock_skipped_total` | counter | `prefix` |
//! | `lock_lost_total` | counter | `reason` |
//! | `lock_released_total` | counter | |
//! | `lock_store_errors_total` | counter | `op` |
//! | `lock_fence_refused_total` | counter | `check="write"` |
//!
//! Every acquisition ends once as released or lost: `lock_acquired_total`
//! = `lock_released_total` + `lock_lost_total` + locks held now. A skip is
//! a try that found the lock held (`try_lock`, `if_held_skip`, `if_held =
//! "skip"`), not a timed-out wait. Keys are not labels, as their number is
//! unbounded: `prefix` is a key's part before its first `:` (`order` for
//! `order:42`), for the first 64 prefixes a process sees, and `other` after
//! them. `lock_fence_refused_total{check="write"}` counts the writes a
//! fence (`RedisFence`, `PgFence`, `MySqlFence`) refused as stale;
//! lock-tower counts its refused requests as `check="request"`.

use tokio::time::Instant;

use crate::error::LossReason;
use crate::error::Operation;

#[cfg(feature = "metrics")]
mod prefix;

#[cfg(feature = "metrics")]
mod enabled {
    use super::*;

    pub(crate) fn acquired(key: &str, started: Instant) {
        let prefix = prefix::label(key);
        metrics::counter!("lock_acquired_total", "prefix" => prefix.clone()).increment(1);
        let waited = started.elapsed().as_secs_f64();
        metrics::histogram!("lock_wait_seconds", "prefix" => prefix).record(waited);
    }

    /// An acquisition granted in place, without waiting: a wait of zero,
    /// recorded without reading the clock.
    pub(crate) fn acquired_at_once(key: &str) {
        let prefix = prefix::label(key);
        metrics::counter!("lock_acquired_total", "prefix" => prefix.clone()).increment(1);
        metrics::histogram!("lock_wait_seconds", "prefix" => prefix).record(0.0);
    }

    pub(crate) fn wait_timed_out(key: &str) {
        metrics::counter!("lock_wait_timeouts_total", "prefix" => prefix::label(key)).increment(1);
    }

    pub(crate) fn skipped(key: &str) {
        metrics::counter!("lock_skipped_total", "prefix" => prefix::label(key)).increment(1);
    }

    pub(crate) fn lost(reason: LossReason) {
        let reason = match reason {
            LossReason::NotRenewedInTime => "not_renewed_in_time",
            LossReason::OwnerChanged => "owner_changed",
            LossReason::MaxHoldTimeReached => "max_hold_time_reached",
        };
        metrics::counter!("lock_lost_total", "reason" => reason).increment(1);
    }

    pub(crate) fn released() {
        metrics::counter!("lock_released_total").increment(1);
    }

    #[cfg_attr(
        not(any(feature = "redis", feature = "postgres", feature = "mysql")),
        allow(dead_code)
    )]
    pub(crate) fn fence_refused() {
        metrics::counter!("lock_fence_refused_total", "check" => "write").increment(1);
    }

    pub(crate) fn store_error(op: Operation) {
        let op = match op {
            Operation::Connect => "connect",
            Operation::Acquire => "acquire",
            Operation::Renew => "renew",
            Operation::Release => "release",
            Operation::Subscribe => "subscribe",
            Operation::ConfirmReplicas => "confirm_replicas",
            Operation::FencedWrite => "fenced_write",
            Operation::Inspect => "inspect",
            Operation::ForceRelease => "force_release",
        };
        metrics::counter!("lock_store_errors_total", "op" => op).increment(1);
    }
}

#[cfg(not(feature = "metrics"))]
mod enabled {
    use super::*;

    pub(crate) fn acquired(_key: &str, _started: Instant) {}
    pub(crate) fn acquired_at_once(_key: &str) {}
    pub(crate) fn wait_timed_out(_key: &str) {}
    pub(crate) fn skipped(_key: &str) {}
    pub(crate) fn lost(_reason: LossReason) {}
    pub(crate) fn released() {}
    #[cfg_attr(
        not(any(feature = "redis", feature = "postgres", feature = "mysql")),
        allow(dead_code)
    )]
    pub(crate) fn fence_refused() {}
    pub(crate) fn store_error(_op: Operation) {}
}

pub(crate) use enabled::*;
