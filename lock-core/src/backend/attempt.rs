//! What a store answers to an acquisition: an [`Attempt`], with a
//! [`Grant`] when the lease is given.

use std::time::Duration;

use crate::token::FencingToken;

/// A lease the store gave: its token, the ttl it actually runs for (a
/// store may round or raise the one asked for: the local deadline and the
/// watchdog use this one), and, for a [`LockKind::Segment`](crate::LockKind::Segment), which segment.
///
/// ```
/// use lock_core::FencingToken;
/// use lock_core::backend::Grant;
/// use std::time::Duration;
///
/// let grant = Grant::new(FencingToken::new(7), Duration::from_secs(30)).with_segment(2);
/// assert_eq!((grant.token, grant.segment), (FencingToken::new(7), Some(2)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Grant {
    /// Minted for this acquisition, above every earlier token of the key.
    pub token: FencingToken,
    /// How long the lease runs unless renewed.
    pub ttl: Duration,
    /// The segment held, for a [`LockKind::Segment`](crate::LockKind::Segment).
    pub segment: Option<u32>,
}

impl Grant {
    /// A lease of `ttl` with `token`.
    pub fn new(token: FencingToken, ttl: Duration) -> Self {
        Grant {
            token,
            ttl,
            segment: None,
        }
    }

    /// The same grant, of segment `segment`.
    pub fn with_segment(mut self, segment: u32) -> Self {
        self.segment = Some(segment);
        self
    }
}

/// The outcome of one attempt to take a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Attempt {
    /// The lease is ours. Also returned when the same owner value already
    /// holds it (a retried request), with its token; its ttl then counts
    /// from this request.
    Acquired(Grant),
    /// Others hold the key and nothing was stored for this request; the
    /// key is expected to free up within `remaining` (`None`: unknown).
    Held {
        /// Time left on the holders' leases.
        remaining: Option<Duration>,
    },
    /// Others hold the key, and this request now has a queue entry in the store
    /// (a place in a fair queue, a waiting writer's mark; an etcd key or
    /// ZooKeeper node): the waiter asks again with the same owner value
    /// on the next release, or after `remaining` at the latest (which the
    /// store makes short enough to keep the queue entry alive), and releases
    /// it if it gives up.
    Queued {
        /// When to ask again at the latest.
        remaining: Option<Duration>,
    },
}
