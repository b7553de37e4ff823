//! Trying again after a store failure that may pass: [`Backoff`], the
//! pauses between tries; [`Outage`], how long an acquisition waits through
//! store errors; and [`release_until`], a release that keeps trying
//! in the background (a key left locked after its holder let go would hold
//! every waiter up for the rest of its ttl).

use std::time::Duration;

use tokio::time::{Instant, sleep_until};

use super::{Backend, LockKind};
use crate::keys::StoredKeys;
use crate::store_error::StoreError;

/// Pauses that double from a first one up to a longest.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    next: Duration,
    longest: Duration,
}

impl Backoff {
    pub(crate) const fn new(first: Duration, longest: Duration) -> Self {
        Backoff {
            next: first,
            longest,
        }
    }

    /// The pause before the next try.
    pub(crate) fn pause(&mut self) -> Duration {
        let pause = self.next;
        self.next = (self.next * 2).min(self.longest);
        pause
    }
}

/// Pauses between the background sends of a release that failed.
const RELEASE_BACKOFF: Backoff =
    Backoff::new(Duration::from_millis(25), Duration::from_millis(500));

/// Sends `owner`'s release of the lease on `keys` again after a transient
/// failure, pausing between sends, until the store answers; gives up
/// (`None`) once the next send would come after `runs_out`, when the lease
/// has ended anyway. Owner-checked, so it never touches another owner's
/// lease.
pub(crate) async fn release_until(
    backend: &dyn Backend,
    keys: &StoredKeys,
    kind: LockKind,
    owner: &str,
    runs_out: Instant,
) -> Option<Result<bool, StoreError>> {
    let mut backoff = RELEASE_BACKOFF;
    loop {
        let at = Instant::now() + backoff.pause();
        if at >= runs_out {
            return None;
        }
        sleep_until(at).await;
        match backend.release(keys, kind, owner).await {
            Err(err) if err.is_transient() => {}
            outcome => return Some(outcome),
        }
    }
}

/// Store errors met in a row by one acquisition. A waiter treats a broken
/// connection as one more reason to wait, but not past its deadline, and
/// not once the store has failed for longer than the Locker's timeout (an
/// outage then fails every request in about that time, not after each
/// one's whole wait). Refusals and error answers are not waited out.
pub(crate) struct Outage {
    /// When the outage has lasted the Locker's timeout.
    pub(crate) gives_up_at: Instant,
    backoff: Backoff,
}

impl Outage {
    /// An outage met by the attempt sent at `sent`, bounded by `timeout`.
    pub(crate) fn began(sent: Instant, timeout: Duration) -> Self {
        Outage {
            gives_up_at: sent + timeout,
            // Soon after a cut (the connection is being replaced), then less
            // often the longer the store stays away.
            backoff: Backoff::new(Duration::from_millis(10), Duration::from_millis(250)),
        }
    }

    /// When to try again after `err`, or `None` to give up.
    pub(crate) fn retry_at(&mut self, err: &StoreError, deadline: Instant) -> Option<Instant> {
        let at = Instant::now() + self.backoff.pause();
        let waits_out = err.is_transient() && at < self.gives_up_at;
        waits_out
            .then(|| at.min(deadline))
            .filter(|at| *at < deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_the_longest() {
        let ms = Duration::from_millis;
        let mut backoff = Backoff::new(ms(10), ms(50));
        let pauses: Vec<_> = (0..5).map(|_| backoff.pause()).collect();
        assert_eq!(pauses, [ms(10), ms(20), ms(40), ms(50), ms(50)]);
    }
}
