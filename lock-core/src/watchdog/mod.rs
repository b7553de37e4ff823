//! The watchdog: renews a lease every ttl/3 and declares it lost when its
//! local deadline passes unconfirmed or the store names another owner.
//! Its task starts only when the first renewal is due ([`schedule`]).
//!
//! The deadline is counted from the moment the last confirmed request was
//! sent (the store's expiry can only be later), minus a drift margin. A
//! renewal is never sent once the deadline has passed: a holder that was
//! paused (SIGSTOP, a blocked runtime) finds its lease lost when it resumes
//! instead of reviving a lease that another owner may have taken meanwhile.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, sleep_until};

use crate::lease::LossReason;
use crate::lease::{LeaseState, deadline_after};

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

fn retry_delay(interval: Duration) -> Duration {
    (interval / 5).max(Duration::from_millis(5))
}

/// Watches `lease` until it is lost; the first renewal is due at `next`.
async fn watch(lease: Arc<LeaseState>, plan: Plan, mut next: Instant) {
    let interval = interval(lease.ttl);
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
                .renew(&lease.keys, lease.claim, lease.owner.as_str(), lease.ttl);
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
                next = sent + interval;
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
