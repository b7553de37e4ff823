//! [`Outage`]: how long an acquisition waits through store errors.

use std::time::Duration;

use tokio::time::Instant;

use crate::backend::Backoff;
use crate::error::StoreError;

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
