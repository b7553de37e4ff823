//! Trying a store again after a failure that may pass: [`Backoff`], the
//! pauses between tries, and [`release_until`], a release that keeps trying
//! in the background (a key left locked after its holder let go would hold
//! every waiter up for the rest of its ttl). The core's acquisitions and
//! leases use both, and RedLock sends its missed releases again with them.

use std::time::Duration;

use tokio::time::{Instant, sleep_until};

use super::LockStore;
use crate::backend::stored_keys::StoredKeys;
use crate::error::StoreError;
use crate::kind::LockKind;

/// Pauses that double from a first one up to a longest, each drawn at
/// random between half of it and all of it ("equal jitter"): the waiters of
/// one outage then spread their tries instead of retrying in step.
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
        let ceiling = self.next;
        self.next = (self.next * 2).min(self.longest);
        jittered(ceiling, fastrand::f64())
    }
}

/// Half of `ceiling`, plus `unit` (in `[0, 1)`) of the other half.
fn jittered(ceiling: Duration, unit: f64) -> Duration {
    ceiling / 2 + (ceiling / 2).mul_f64(unit)
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
    backend: &dyn LockStore,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_the_longest_each_between_half_and_all_of_it() {
        let ms = Duration::from_millis;
        let mut backoff = Backoff::new(ms(10), ms(50));
        let ceilings = [ms(10), ms(20), ms(40), ms(50), ms(50)];
        for ceiling in ceilings {
            let pause = backoff.pause();
            assert!(
                pause >= ceiling / 2 && pause <= ceiling,
                "{pause:?} of {ceiling:?}"
            );
        }
        assert_eq!(jittered(ms(40), 0.0), ms(20));
        assert_eq!(jittered(ms(40), 0.5), ms(30));
    }

    #[test]
    fn two_waiters_do_not_pause_in_step() {
        let ms = Duration::from_millis;
        let pauses = || {
            let mut backoff = Backoff::new(ms(10), ms(250));
            (0..8).map(|_| backoff.pause()).collect::<Vec<_>>()
        };
        assert_ne!(pauses(), pauses(), "the same pauses: no jitter");
    }
}
