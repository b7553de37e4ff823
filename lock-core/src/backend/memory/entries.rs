//! The kinds of lock beside the exclusive lease (fair queues, read-write
//! locks, semaphores, striped locks): each keeps the leases and queue entries of
//! one key as [`Entries`], in a map of its own, so that two kinds of lock
//! on one key stay two locks.

use std::time::Duration;

use tokio::time::Instant;

use super::{HeldBy, State};
use crate::backend::Attempt;
use crate::backend::stored_keys::{KeyMap, StoredKeys};
use crate::error::StoreError;
use crate::inspect::Inspection;
use crate::kind::LockKind;
use crate::token::FencingToken;

/// The leases (and queue entries) one kind of lock keeps on one key.
pub(super) trait Entries {
    /// Nothing held yet, for `kind`.
    fn new(kind: LockKind) -> Self
    where
        Self: Sized;

    /// Takes a lease of `kind` for `owner` (its own again, restarted, if
    /// it holds one), minting with `mint`; or queues, or says held.
    fn acquire(
        &mut self,
        kind: LockKind,
        owner: &str,
        ttl: Duration,
        now: Instant,
        mint: &mut dyn FnMut() -> FencingToken,
    ) -> Result<Attempt, StoreError>;

    /// Extends `owner`'s live lease; `false` if it has none.
    fn renew(&mut self, owner: &str, ttl: Duration, now: Instant) -> bool;

    /// Ends `owner`'s live lease or withdraws its queue entry.
    fn release(&mut self, owner: &str, now: Instant) -> Released;

    /// Forgets what has expired; `true` if nothing is left.
    fn sweep(&mut self, now: Instant) -> bool;

    /// Adds the live holders and queue entries to `seen` (`segments`: a
    /// striped lock's map).
    fn inspect(&self, now: Instant, segments: bool, seen: &mut Inspection);
}

/// Extends `owner`'s live lease among `holders` (`parts` gives a holder's
/// owner and expiry); `false` if it has none.
pub(super) fn renew_holder<H>(
    holders: &mut [H],
    owner: &str,
    ttl: Duration,
    now: Instant,
    parts: fn(&mut H) -> (&HeldBy, &mut Instant),
) -> bool {
    let mine = holders.iter_mut().map(parts).find(|(by, _)| by.is(owner));
    match mine {
        Some((_, expires)) if *expires > now => {
            *expires = now + ttl;
            true
        }
        _ => false,
    }
}

/// What a release did.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Released {
    /// The owner had a live lease or queue entry, now gone.
    pub(super) had: bool,
    /// Some waiter may now proceed: publish a release.
    pub(super) wakes: bool,
}

impl State {
    /// Runs `op` on the entries of `kind` on `keys` (made first when
    /// `create`; `None` if there are none), and drops them once empty.
    pub(super) fn on_entries<R>(
        &mut self,
        keys: &StoredKeys,
        kind: LockKind,
        create: bool,
        now: Instant,
        op: impl FnOnce(&mut dyn Entries, &mut dyn FnMut() -> FencingToken) -> R,
    ) -> Option<R> {
        let State {
            fair,
            rw,
            permits,
            segments,
            last_token,
            ..
        } = self;
        let mut mint = || {
            *last_token += 1;
            FencingToken::new(*last_token)
        };
        let on = Site {
            keys,
            kind,
            create,
            now,
        };
        match kind {
            LockKind::Fair => on.run(fair, &mut mint, op),
            LockKind::Read | LockKind::Write => on.run(rw, &mut mint, op),
            LockKind::Permit { .. } => on.run(permits, &mut mint, op),
            LockKind::Segment { .. } => on.run(segments, &mut mint, op),
            _ => None,
        }
    }

    /// Forgets expired entries of every kind.
    pub(super) fn sweep_entries(&mut self, now: Instant) {
        self.fair.retain(|_, e| !e.sweep(now));
        self.rw.retain(|_, e| !e.sweep(now));
        self.permits.retain(|_, e| !e.sweep(now));
        self.segments.retain(|_, e| !e.sweep(now));
    }
}

/// Where [`State::on_entries`] works.
struct Site<'a> {
    keys: &'a StoredKeys,
    kind: LockKind,
    create: bool,
    now: Instant,
}

impl Site<'_> {
    fn run<T: Entries, R>(
        self,
        map: &mut KeyMap<T>,
        mint: &mut dyn FnMut() -> FencingToken,
        op: impl FnOnce(&mut dyn Entries, &mut dyn FnMut() -> FencingToken) -> R,
    ) -> Option<R> {
        let entries = if self.create {
            map.entry(self.keys.clone())
                .or_insert_with(|| T::new(self.kind))
        } else {
            map.get_mut(self.keys)?
        };
        let result = op(entries, mint);
        if entries.sweep(self.now) {
            map.remove(self.keys);
        }
        Some(result)
    }
}
