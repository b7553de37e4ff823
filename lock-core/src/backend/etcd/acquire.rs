//! Acquiring on etcd: an entry put once under a live lease, whose place
//! among the entries before it says whether it holds.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::held_checks::delete_entry;
use super::leases::Lease;
use super::queue::{Ask, Names, take_place, take_segment};
use super::tombstones::{self, Tombstone, retired};
use super::{EtcdBackend, Placed, TryFailed, reaping};
use crate::backend::queued::Entry;
use crate::backend::stored_keys::StoredKeys;
use crate::backend::{Attempt, Grant};
use crate::error::StoreError;
use crate::kind::LockKind;
use crate::token::FencingToken;

impl EtcdBackend {
    pub(super) async fn enqueue(
        &self,
        keys: &StoredKeys,
        kind: LockKind,
        owner: &str,
        ttl: Duration,
    ) -> Result<Attempt, StoreError> {
        let shared = &self.shared;
        let started = Instant::now();
        let names = Names::of(keys, kind, owner);
        self.reaper();
        // A queue entry asked for again stays under its own lease.
        let mut lease = match shared.held.get(&names.entry) {
            Some(entry) => entry.lease,
            None => shared.leases.for_ttl(ttl).await?,
        };
        // A lease that ran out behind this backend's back (a pause longer
        // than its ttl) is replaced once; its entries went with it.
        for retry in [false, true] {
            match self
                .acquire_under(&names, kind, owner, &lease, started)
                .await
            {
                Err(TryFailed::LeaseGone) if !retry => {
                    shared.leases.forget(&lease);
                    shared.held.take(&names.entry);
                    lease = shared.leases.for_ttl(ttl).await?;
                }
                Err(TryFailed::LeaseGone) => break,
                Err(TryFailed::Store(err)) => return Err(err),
                Ok(attempt) => return Ok(attempt),
            }
        }
        Err(StoreError::in_doubt("etcd dropped a fresh lease"))
    }

    /// One try under `lease`, kept alive since `started`.
    async fn acquire_under(
        &self,
        names: &Names,
        kind: LockKind,
        owner: &str,
        lease: &Arc<Lease>,
        started: Instant,
    ) -> Result<Attempt, TryFailed> {
        let shared = &self.shared;
        if shared.held.is_reaping(&names.entry) {
            return Err(TryFailed::Store(reaping()));
        }
        let again = self.asked_again(names, lease, started).await?;
        let tombstone = Tombstone::of(&shared.held, &names.entry);
        // Refused for good, nothing was put and the acquisition ends: no
        // put of this ask is left to retire.
        let refused = |err: &StoreError| {
            if !err.is_transient() && again.is_none() {
                shared.held.take(&names.entry);
            }
        };
        // The keep-alive goes with the put: the entry then lives a full
        // ttl from `started`, whenever the lease was last renewed.
        let alive = lease.confirm_since(started);
        let (placed, alive) = match kind {
            LockKind::Segment { of } => {
                let take = self.place_in_segment(names, of, owner, lease, &tombstone, again);
                let (placed, alive) = tokio::join!(take, alive);
                (placed.inspect_err(refused)?, alive)
            }
            _ => {
                let take = self.place_in_queue(names, kind, lease, started, &tombstone, again);
                let (placed, alive) = tokio::join!(take, alive);
                (Some((placed.inspect_err(refused)?, None)), alive)
            }
        };
        let Some((placed, segment)) = placed else {
            return match alive {
                Ok(false) => Err(TryFailed::LeaseGone),
                _ => Ok(Attempt::Held { remaining: None }),
            };
        };
        self.answer(names, lease, placed, segment, alive).await
    }

    /// The revision of the entry a waiter asks for again, or `None` for a
    /// first ask, whose entry is recorded as pending here (and an earlier
    /// put of the same owner that went unanswered retired).
    async fn asked_again(
        &self,
        names: &Names,
        lease: &Arc<Lease>,
        started: Instant,
    ) -> Result<Option<i64>, StoreError> {
        let shared = &self.shared;
        let found = shared.held.get(&names.entry);
        let again = found
            .as_ref()
            .map(|entry| entry.revision)
            .filter(|&r| r != 0);
        if again.is_none() {
            if let Some(pending) = found {
                // An earlier put of this owner went unanswered: retired, so
                // that it cannot land after this acquisition ends.
                let (client, timeout) = (&shared.client, shared.timeout);
                tombstones::retire(client, timeout, &shared.held, &names.entry, &pending).await?;
            }
            self.pend(names, lease, started)?;
        }
        Ok(again)
    }

    /// One of the lock's `of` segments for `owner` (with its index), or
    /// `None` when all are held.
    async fn place_in_segment(
        &self,
        names: &Names,
        of: u32,
        owner: &str,
        lease: &Lease,
        tombstone: &Tombstone,
        again: Option<i64>,
    ) -> Result<Option<(Placed, Option<u32>)>, StoreError> {
        let shared = &self.shared;
        let (client, timeout) = (&shared.client, shared.timeout);
        let segment = take_segment(client, timeout, names, of, owner, lease.id, tombstone).await?;
        if segment.is_none() && again.is_none() {
            // All held, every put answered: none to retire.
            shared.held.take(&names.entry);
        }
        Ok(segment.map(|segment| {
            let index = segment.index;
            (Placed::from(segment), Some(index))
        }))
    }

    /// The entry's place in the key's queue: put, or asked for again (and
    /// put anew if it is gone).
    async fn place_in_queue(
        &self,
        names: &Names,
        kind: LockKind,
        lease: &Arc<Lease>,
        started: Instant,
        tombstone: &Tombstone,
        again: Option<i64>,
    ) -> Result<Placed, StoreError> {
        let shared = &self.shared;
        let (client, timeout) = (&shared.client, shared.timeout);
        let ask = match again {
            Some(revision) => Ask::Again { revision },
            None => Ask::First(tombstone),
        };
        let place = match take_place(client, timeout, names, kind, lease.id, ask).await? {
            Some(place) => place,
            // The queue entry is gone (its lease ran out, or an operator
            // deleted it): put anew.
            None if again.is_some() => {
                shared.held.take(&names.entry);
                self.pend(names, lease, started)?;
                let first = Ask::First(tombstone);
                let place = take_place(client, timeout, names, kind, lease.id, first);
                place.await?.ok_or_else(retired)?
            }
            None => return Err(retired()),
        };
        Ok(Placed {
            stored: names.entry.clone(),
            revision: place.revision,
            token: place.token,
            lease: place.lease,
            holds: place.holds,
        })
    }

    /// Records the entry `placed` and answers: a grant (of `segment`),
    /// queued, or an error when it was put under another lease or `alive`
    /// says the lease is gone.
    async fn answer(
        &self,
        names: &Names,
        lease: &Arc<Lease>,
        placed: Placed,
        segment: Option<u32>,
        alive: Result<bool, StoreError>,
    ) -> Result<Attempt, TryFailed> {
        let shared = &self.shared;
        let ttl = lease.ttl;
        let entry = Entry {
            stored: placed.stored.clone(),
            revision: placed.revision,
            lease: Arc::clone(lease),
            expires: Instant::now() + ttl,
        };
        // Recorded before anything else can fail: if nothing releases the
        // entry, the reaper deletes it at its ttl.
        if !shared.held.put(names.entry.clone(), entry) {
            return Err(TryFailed::Store(reaping()));
        }
        if placed.lease != lease.id {
            // Put under a lease this backend no longer keeps (by a send
            // whose answer was lost): not one to hold on.
            shared.held.take(&names.entry);
            let (client, timeout) = (&shared.client, shared.timeout);
            let _ = delete_entry(client, timeout, &placed.stored, placed.revision).await;
            let err = StoreError::in_doubt("the entry was under an abandoned lease");
            return Err(TryFailed::Store(err));
        }
        match alive {
            Ok(true) => {}
            Ok(false) => return Err(TryFailed::LeaseGone),
            // The entry stands: whoever gives up on it releases it.
            Err(err) => return Err(TryFailed::Store(err.unknown(true))),
        }
        let Ok(token) = u64::try_from(placed.token) else {
            let err = StoreError::permanent("etcd answered a negative revision");
            return Err(TryFailed::Store(err));
        };
        if !placed.holds {
            // Asked again well within the queue entry's ttl, which keeps it.
            return Ok(Attempt::Queued {
                remaining: Some(ttl / 3),
            });
        }
        let grant = Grant::new(FencingToken::new(token), ttl);
        Ok(Attempt::Acquired(match segment {
            Some(index) => grant.with_segment(index),
            None => grant,
        }))
    }

    /// Records the entry `names.entry` before its put is sent: a put that
    /// lands after its acquire gave up is still deleted (and a late one
    /// stopped, see [`tombstones`]), at its ttl at the latest.
    fn pend(&self, names: &Names, lease: &Arc<Lease>, started: Instant) -> Result<(), StoreError> {
        let pending = Entry {
            stored: names.entry.clone(),
            revision: 0,
            lease: Arc::clone(lease),
            expires: started + lease.ttl,
        };
        match self.shared.held.put(names.entry.clone(), pending) {
            true => Ok(()),
            false => Err(reaping()),
        }
    }
}
