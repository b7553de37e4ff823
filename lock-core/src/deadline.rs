//! A lease's local deadline: its ttl from the send of the request that
//! took or renewed it, less a margin for clock drift between this host and
//! the store.

use std::time::Duration;

use tokio::time::Instant;

/// The margin kept off a lease's local deadline for clock drift between
/// this host and the store (RedLock's 1% + 2 ms).
pub(crate) fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// The local deadline of a lease of `ttl` whose request was sent at `sent`.
pub(crate) fn deadline_after(sent: Instant, ttl: Duration) -> Instant {
    sent + ttl.saturating_sub(drift(ttl))
}
