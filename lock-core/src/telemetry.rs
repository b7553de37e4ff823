//! Metrics through the `metrics` facade (feature `metrics`); no-ops
//! without it. Tracing events are emitted where things happen.
//!
//! | metric | kind | labels |
//! |---|---|---|
//! | `lock_acquired_total` | counter | |
//! | `lock_wait_seconds` | histogram | |
//! | `lock_wait_timeouts_total` | counter | |
//! | `lock_lost_total` | counter | `reason` |
//! | `lock_released_total` | counter | |
//! | `lock_store_errors_total` | counter | `op` |
//!
//! Every acquisition ends once as released or lost: `lock_acquired_total`
//! = `lock_released_total` + `lock_lost_total` + locks held now. Keys are
//! not labels: their number is unbounded.

use tokio::time::Instant;

use crate::error::LossReason;
use crate::error::Operation;

#[cfg(feature = "metrics")]
mod enabled {
    use super::*;

    pub(crate) fn acquired(started: Instant) {
        metrics::counter!("lock_acquired_total").increment(1);
        metrics::histogram!("lock_wait_seconds").record(started.elapsed().as_secs_f64());
    }

    /// An acquisition granted in place, without waiting: a wait of zero,
    /// recorded without reading the clock.
    pub(crate) fn acquired_at_once() {
        metrics::counter!("lock_acquired_total").increment(1);
        metrics::histogram!("lock_wait_seconds").record(0.0);
    }

    pub(crate) fn wait_timed_out() {
        metrics::counter!("lock_wait_timeouts_total").increment(1);
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

    pub(crate) fn acquired(_started: Instant) {}
    pub(crate) fn acquired_at_once() {}
    pub(crate) fn wait_timed_out() {}
    pub(crate) fn lost(_reason: LossReason) {}
    pub(crate) fn released() {}
    pub(crate) fn store_error(_op: Operation) {}
}

pub(crate) use enabled::*;
