//! The watchdog: renews a lease every ttl/3 and declares it lost when its
//! local deadline passes unconfirmed or the store names another owner.
//! Its task starts only when the first renewal is due ([`schedule`]).
//!
//! The deadline is counted from the moment the last confirmed request was
//! sent (the store's expiry can only be later), minus a drift margin. A
//! renewal is never sent once the deadline has passed: a holder that was
//! paused (SIGSTOP, a blocked runtime) finds its lease lost when it resumes
//! instead of reviving a lease that another owner may have taken meanwhile.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use tokio::time::{Instant, sleep_until};

use crate::deadline::deadline_after;
use crate::error::LossReason;
use crate::lease::LeaseState;

/// How the watchdog treats one lease.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    /// Renew at all (`false`: the lease simply runs out at its ttl).
    pub(crate) renew: bool,
    /// Stop renewing once this instant is reached.
    pub(crate) hold_until: Option<Instant>,
}

mod schedule;

pub(crate) use self::schedule::{Control, Watchdogs, stop};

/// How often a lease of `ttl` is renewed (its first renewal is due this
/// long after the acquire was sent).
pub(crate) fn interval(ttl: Duration) -> Duration {
    ttl / 3
}

/// Renewals are due on ticks of this many per interval, counted from one
/// instant for the whole process.
const TICKS_PER_INTERVAL: u32 = 20;

/// The instant renewal ticks are counted from.
static TICKS_FROM: LazyLock<Instant> = LazyLock::new(Instant::now);

/// When a renewal due at `at` is sent: at the first tick at or after it
/// (later by at most a twentieth of the `interval`, far from the lease's
/// deadline). Leases of one ttl then renew on shared ticks, so that a
/// backend that batches (Redis) renews many in one call: 10 000 held locks
/// cost a few calls per tick instead of one per lock (`cargo run --release
/// -p lock-bench --example watchdog_renewals`, bench/README.md). Done by the
/// watchdog task, not when the lock is taken, so that it costs the hot path
/// nothing.
fn on_tick(at: Instant, interval: Duration) -> Instant {
    let tick = interval / TICKS_PER_INTERVAL;
    match at.checked_duration_since(*TICKS_FROM) {
        Some(since) if !tick.is_zero() => {
            // In u64 nanoseconds (584 years), cheaper than u128.
            let tick = tick.as_nanos() as u64;
            let into_tick = since.as_nanos() as u64 % tick;
            if into_tick == 0 {
                at
            } else {
                at + Duration::from_nanos(tick - into_tick)
            }
        }
        // A clock before the first tick (a paused test runtime's): as is.
        _ => at,
    }
}

fn retry_delay(interval: Duration) -> Duration {
    (interval / 5).max(Duration::from_millis(5))
}

/// Watches `lease` until it is lost; the first renewal is due at `next`.
async fn watch(lease: Arc<LeaseState>, plan: Plan, next: Instant) {
    let interval = interval(lease.ttl);
    let mut next = on_tick(next, interval);
    loop {
        let deadline = lease.deadline();
        let held_too_long = plan.hold_until.is_some_and(|h| next >= h);
        if !plan.renew || held_too_long {
            sleep_until(deadline).await;
            let reason = if held_too_long {
                LossReason::MaxHoldTimeReached
            } else {
                LossReason::NotRenewedInTime
            };
            lease.mark_lost(reason);
            return;
        }
        tokio::select! {
            biased;
            _ = sleep_until(deadline) => {}
            _ = sleep_until(next) => {}
        }
        // Both timers may be due after a pause: the deadline wins.
        let sent = Instant::now();
        if sent >= deadline {
            lease.mark_lost(LossReason::NotRenewedInTime);
            return;
        }
        let renewal =
            lease
                .backend()
                .renew(&lease.keys, lease.kind, lease.owner.as_str(), lease.ttl);
        let outcome = tokio::select! {
            biased;
            _ = sleep_until(deadline) => None,
            outcome = renewal => Some(outcome),
        };
        match outcome {
            None => {
                lease.mark_lost(LossReason::NotRenewedInTime);
                return;
            }
            Some(Ok(true)) => {
                lease.extend(deadline_after(sent, lease.ttl));
                next = on_tick(sent + interval, interval);
                tracing::trace!(key = %lease.keys.user(), token = %lease.token, "lease renewed");
            }
            Some(Ok(false)) => {
                lease.mark_lost(LossReason::OwnerChanged);
                return;
            }
            Some(Err(err)) => {
                crate::telemetry::store_error(crate::error::Operation::Renew);
                tracing::debug!(key = %lease.keys.user(), token = %lease.token, error = %err, "renewal failed; retrying");
                next = Instant::now() + retry_delay(interval);
            }
        }
    }
}
