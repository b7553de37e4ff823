//! Read-write locks in the memory store: many readers or one writer, and
//! a waiting writer's mark that keeps new readers out.

use std::time::Duration;

use tokio::time::Instant;

use super::HeldBy;
use super::entries::{Entries, Released, renew_holder};
use crate::backend::{Attempt, Grant};
use crate::error::StoreError;
use crate::inspect::Inspection;
use crate::kind::LockKind;
use crate::token::FencingToken;
use crate::waiters::Waiter;

/// The holders of one key, and the writer waiting for them.
#[derive(Debug, Default)]
pub(super) struct ReadWrite {
    holders: Vec<Holder>,
    /// A writer's queue entry: while it stands, no new reader is let in.
    writer_waiting: Option<(HeldBy, Instant)>,
}

#[derive(Debug)]
struct Holder {
    owner: HeldBy,
    token: FencingToken,
    expires: Instant,
    writes: bool,
}

impl ReadWrite {
    fn until(at: Instant, now: Instant) -> Duration {
        at.saturating_duration_since(now)
    }

    /// Time until the first holder's lease ends (a writer's, if `writers`).
    fn soonest(&self, writers: bool, now: Instant) -> Option<Duration> {
        let holders = self.holders.iter().filter(|h| h.writes || !writers);
        holders.map(|h| Self::until(h.expires, now)).min()
    }
}

impl Entries for ReadWrite {
    fn new(_: LockKind) -> Self {
        ReadWrite::default()
    }

    fn inspect(&self, now: Instant, _: bool, seen: &mut Inspection) {
        for holder in self.holders.iter().filter(|h| h.expires > now) {
            let kind = if holder.writes {
                LockKind::Write
            } else {
                LockKind::Read
            };
            seen.holders.push(
                crate::inspect::Holder::new(kind, holder.owner.as_str(), holder.token)
                    .remaining(holder.expires - now),
            );
        }
        if let Some((writer, _)) = self.writer_waiting.as_ref().filter(|(_, at)| *at > now) {
            seen.waiters
                .line_up(Waiter::new(LockKind::Write, writer.as_str()));
        }
    }

    fn sweep(&mut self, now: Instant) -> bool {
        self.holders.retain(|h| h.expires > now);
        if self
            .writer_waiting
            .as_ref()
            .is_some_and(|(_, at)| *at <= now)
        {
            self.writer_waiting = None;
        }
        self.holders.is_empty() && self.writer_waiting.is_none()
    }

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
            return Ok(Attempt::Acquired(Grant::new(mine.token, ttl)));
        }
        let writes = kind == LockKind::Write;
        let other_writer_waits = match &self.writer_waiting {
            Some((waiting, at)) => (!waiting.is(owner)).then_some(*at),
            None => None,
        };
        let writer_holds = self.holders.iter().any(|h| h.writes);
        let free = if writes {
            self.holders.is_empty() && other_writer_waits.is_none()
        } else {
            !writer_holds && other_writer_waits.is_none()
        };
        if free {
            if writes {
                self.writer_waiting = None;
            }
            let token = mint();
            self.holders.push(Holder {
                owner: HeldBy::new(owner),
                token,
                expires: now + ttl,
                writes,
            });
            return Ok(Attempt::Acquired(Grant::new(token, ttl)));
        }
        if writes && other_writer_waits.is_none() {
            // The first writer to wait marks the key: new readers wait too.
            self.writer_waiting = Some((HeldBy::new(owner), now + ttl));
            let until_free = self.soonest(false, now).unwrap_or(ttl);
            return Ok(Attempt::Queued {
                remaining: Some((ttl / 2).min(until_free)),
            });
        }
        // Behind a writer: one that holds, or one that waits.
        let remaining = match other_writer_waits {
            Some(at) if !writer_holds => Some(Self::until(at, now)),
            _ => self.soonest(!writes, now),
        };
        Ok(Attempt::Held { remaining })
    }

    fn renew(&mut self, owner: &str, ttl: Duration, now: Instant) -> bool {
        renew_holder(&mut self.holders, owner, ttl, now, |h| {
            (&h.owner, &mut h.expires)
        })
    }

    fn release(&mut self, owner: &str, now: Instant) -> Released {
        if let Some(at) = self.holders.iter().position(|h| h.owner.is(owner)) {
            let left = self.holders.swap_remove(at);
            let had = left.expires > now;
            // A writer leaving frees everyone; a reader, only a writer
            // waiting for the last one.
            let wakes = had && (left.writes || self.holders.iter().all(|h| h.expires <= now));
            return Released { had, wakes };
        }
        match self.writer_waiting.take() {
            Some((waiting, at)) if waiting.is(owner) => {
                let had = at > now;
                // Readers held back by the mark may go, unless a writer holds.
                let wakes = had && !self.holders.iter().any(|h| h.writes);
                Released { had, wakes }
            }
            other => {
                self.writer_waiting = other;
                Released::default()
            }
        }
    }
}
