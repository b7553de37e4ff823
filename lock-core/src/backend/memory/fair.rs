//! Fair locks in the memory store: queue entries in arrival order, the first
//! one holds.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use super::HeldBy;
use super::entries::{Entries, Released};
use crate::backend::{Attempt, Grant};
use crate::error::StoreError;
use crate::inspect::{Holder, Inspection};
use crate::kind::LockKind;
use crate::token::FencingToken;
use crate::waiters::Waiter;

/// The queue of one key: the holder (if any) first, then the waiters'
/// queue entries in the order they first asked.
#[derive(Debug, Default)]
pub(super) struct FairQueue {
    entries: VecDeque<FairEntry>,
}

#[derive(Debug)]
struct FairEntry {
    owner: HeldBy,
    /// An entry lapses unless its waiter asks again; a lease unless renewed.
    expires: Instant,
    /// Minted when the entry came first: it then holds the lock.
    token: Option<FencingToken>,
}

impl Entries for FairQueue {
    fn new(_: LockKind) -> Self {
        FairQueue::default()
    }

    fn sweep(&mut self, now: Instant) -> bool {
        self.entries.retain(|t| t.expires > now);
        self.entries.is_empty()
    }

    fn inspect(&self, now: Instant, _: bool, seen: &mut Inspection) {
        let live = self.entries.iter().filter(|t| t.expires > now);
        for entry in live {
            let owner = entry.owner.as_str();
            match entry.token {
                Some(token) => seen
                    .holders
                    .push(Holder::new(LockKind::Fair, owner, token).remaining(entry.expires - now)),
                None => seen.waiters.line_up(Waiter::new(LockKind::Fair, owner)),
            }
        }
    }

    fn acquire(
        &mut self,
        _: LockKind,
        owner: &str,
        ttl: Duration,
        now: Instant,
        mint: &mut dyn FnMut() -> FencingToken,
    ) -> Result<Attempt, StoreError> {
        self.sweep(now);
        let at = match self.entries.iter().position(|t| t.owner.is(owner)) {
            Some(at) => at,
            None => {
                self.entries.push_back(FairEntry {
                    owner: HeldBy::new(owner),
                    expires: now,
                    token: None,
                });
                self.entries.len() - 1
            }
        };
        self.entries[at].expires = now + ttl;
        if at == 0 {
            let token = *self.entries[0].token.get_or_insert_with(&mut *mint);
            return Ok(Attempt::Acquired(Grant::new(token, ttl)));
        }
        // Ask again when one ahead could lapse, and halfway through the
        // entry's own lease at the latest.
        let ahead = self.entries.iter().take(at).map(|t| t.expires).min();
        let until_ahead = ahead.map_or(ttl, |a| a.saturating_duration_since(now));
        let remaining = (ttl / 2).min(until_ahead);
        Ok(Attempt::Queued {
            remaining: Some(remaining),
        })
    }

    fn renew(&mut self, owner: &str, ttl: Duration, now: Instant) -> bool {
        match self.entries.front_mut() {
            Some(first)
                if first.owner.is(owner) && first.token.is_some() && first.expires > now =>
            {
                first.expires = now + ttl;
                true
            }
            _ => false,
        }
    }

    fn release(&mut self, owner: &str, now: Instant) -> Released {
        let Some(at) = self.entries.iter().position(|t| t.owner.is(owner)) else {
            return Released::default();
        };
        let had = self.entries.remove(at).is_some_and(|t| t.expires > now);
        // The first place freed: the next entry may take it.
        Released {
            had,
            wakes: had && at == 0,
        }
    }
}
