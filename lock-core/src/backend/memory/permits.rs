//! Semaphores in the memory store: up to `of` leases on one key, each with
//! its own owner, token and expiry.

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

    /// Takes one of `of` permits for `owner` (its own again, restarted, if
    /// it holds one), minting a token with `mint`.
    pub(super) fn acquire(
        &mut self,
        of: u32,
        owner: &str,
        ttl: Duration,
        now: Instant,
        mint: impl FnOnce() -> FencingToken,
    ) -> Result<Attempt, StoreError> {
        self.sweep(now);
        if let Some(mine) = self.holders.iter_mut().find(|h| h.owner.is(owner)) {
            mine.expires = now + ttl;
            return Ok(Attempt::Acquired(Grant::new(mine.token, ttl)));
        }
        if self.holders.is_empty() {
            self.of = of;
        } else if self.of != of {
            return Err(StoreError::permits_disagree(of, self.of));
        }
        if self.holders.len() >= of as usize {
            let soonest = self.holders.iter().map(|h| h.expires).min();
            let remaining = soonest.map(|at| at.saturating_duration_since(now));
            return Ok(Attempt::Held { remaining });
        }
        let token = mint();
        self.holders.push(Holder {
            owner: HeldBy::new(owner),
            token,
            expires: now + ttl,
        });
        Ok(Attempt::Acquired(Grant::new(token, ttl)))
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
