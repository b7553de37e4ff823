//! Semaphores and striped locks in the memory store: up to `of` leases on
//! one key, each with its own owner, token, expiry and (striped) segment.

use std::time::Duration;

use tokio::time::Instant;

use super::HeldBy;
use crate::backend::{Attempt, Grant};
use crate::store_error::StoreError;
use crate::token::FencingToken;

/// The permits of one key.
#[derive(Debug)]
pub(super) struct Permits {
    /// How many the holders agreed on.
    of: u32,
    holders: Vec<Holder>,
}

#[derive(Debug)]
struct Holder {
    owner: HeldBy,
    token: FencingToken,
    expires: Instant,
    /// The segment, for a striped lock (the lowest free one).
    segment: u32,
}

/// What the leases of one key are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Permits,
    Segments,
}

impl Permits {
    pub(super) fn new(of: u32) -> Self {
        Permits {
            of,
            holders: Vec::new(),
        }
    }

    /// Forgets expired holders; `true` if none is left (the entry can go).
    pub(super) fn sweep(&mut self, now: Instant) -> bool {
        self.holders.retain(|h| h.expires > now);
        self.holders.is_empty()
    }

    /// Takes one of `of` permits or segments for `owner` (its own again,
    /// restarted, if it holds one), minting a token with `mint`.
    pub(super) fn acquire(
        &mut self,
        kind: Kind,
        of: u32,
        owner: &str,
        ttl: Duration,
        now: Instant,
        mint: impl FnOnce() -> FencingToken,
    ) -> Result<Attempt, StoreError> {
        self.sweep(now);
        if let Some(mine) = self.holders.iter_mut().find(|h| h.owner.is(owner)) {
            mine.expires = now + ttl;
            return Ok(Attempt::Acquired(grant(
                kind,
                mine.token,
                ttl,
                mine.segment,
            )));
        }
        if self.holders.is_empty() {
            self.of = of;
        } else if self.of != of {
            let what = match kind {
                Kind::Permits => "permits",
                Kind::Segments => "segments",
            };
            return Err(StoreError::size_disagrees(what, of, self.of));
        }
        if self.holders.len() >= of as usize {
            let soonest = self.holders.iter().map(|h| h.expires).min();
            let remaining = soonest.map(|at| at.saturating_duration_since(now));
            return Ok(Attempt::Held { remaining });
        }
        let token = mint();
        let segment = (0..of)
            .find(|s| self.holders.iter().all(|h| h.segment != *s))
            .unwrap_or_default();
        self.holders.push(Holder {
            owner: HeldBy::new(owner),
            token,
            expires: now + ttl,
            segment,
        });
        Ok(Attempt::Acquired(grant(kind, token, ttl, segment)))
    }

    /// Extends `owner`'s live permit; `false` if it has none.
    pub(super) fn renew(&mut self, owner: &str, ttl: Duration, now: Instant) -> bool {
        let mine = self.holders.iter_mut().find(|h| h.owner.is(owner));
        match mine {
            Some(mine) if mine.expires > now => {
                mine.expires = now + ttl;
                true
            }
            _ => false,
        }
    }

    /// Gives back `owner`'s live permit; `false` if it had none.
    pub(super) fn release(&mut self, owner: &str, now: Instant) -> bool {
        let Some(at) = self.holders.iter().position(|h| h.owner.is(owner)) else {
            return false;
        };
        // An expired permit is removed, but was not held.
        self.holders.swap_remove(at).expires > now
    }
}

fn grant(kind: Kind, token: FencingToken, ttl: Duration, segment: u32) -> Grant {
    match kind {
        Kind::Permits => Grant::new(token, ttl),
        Kind::Segments => Grant::new(token, ttl).with_segment(segment),
    }
}
