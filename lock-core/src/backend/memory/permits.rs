//! Semaphores and striped locks in the memory store: up to `of` leases on
//! one key, each with its own owner, token, expiry and (striped) segment.

use std::time::Duration;

use tokio::time::Instant;

use super::HeldBy;
use super::entries::{Entries, Released, renew_holder};
use crate::backend::{Attempt, Grant};
use crate::error::StoreError;
use crate::kind::LockKind;
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

impl Entries for Permits {
    fn new(kind: LockKind) -> Self {
        Permits {
            of: count(kind),
            holders: Vec::new(),
        }
    }

    fn inspect(&self, now: Instant, segments: bool, seen: &mut crate::inspect::Inspection) {
        let of = self.of;
        for holder in self.holders.iter().filter(|h| h.expires > now) {
            let kind = if segments {
                LockKind::Segment { of }
            } else {
                LockKind::Permit { of }
            };
            let found = crate::inspect::Holder::new(kind, holder.owner.as_str(), holder.token)
                .remaining(holder.expires - now);
            seen.holders.push(if segments {
                found.segment(holder.segment)
            } else {
                found
            });
        }
    }

    fn sweep(&mut self, now: Instant) -> bool {
        self.holders.retain(|h| h.expires > now);
        self.holders.is_empty()
    }

    /// Takes one of the kind's permits or segments for `owner`.
    fn acquire(
        &mut self,
        kind: LockKind,
        owner: &str,
        ttl: Duration,
        now: Instant,
        mint: &mut dyn FnMut() -> FencingToken,
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
        let of = count(kind);
        if self.holders.is_empty() {
            self.of = of;
        } else if self.of != of {
            let what = match kind {
                LockKind::Segment { .. } => "segments",
                _ => "permits",
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

    fn renew(&mut self, owner: &str, ttl: Duration, now: Instant) -> bool {
        renew_holder(&mut self.holders, owner, ttl, now, |h| {
            (&h.owner, &mut h.expires)
        })
    }

    fn release(&mut self, owner: &str, now: Instant) -> Released {
        let Some(at) = self.holders.iter().position(|h| h.owner.is(owner)) else {
            return Released::default();
        };
        // An expired permit is removed, but was not held.
        let had = self.holders.swap_remove(at).expires > now;
        Released { had, wakes: had }
    }
}

/// The number of permits or segments `kind` names.
fn count(kind: LockKind) -> u32 {
    match kind {
        LockKind::Permit { of } | LockKind::Segment { of } => of,
        _ => 1,
    }
}

fn grant(kind: LockKind, token: FencingToken, ttl: Duration, segment: u32) -> Grant {
    match kind {
        LockKind::Segment { .. } => Grant::new(token, ttl).with_segment(segment),
        _ => Grant::new(token, ttl),
    }
}
