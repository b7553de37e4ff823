//! What the two SQL stores (PostgreSQL, MySQL) share: how each kind of
//! lock is named and told apart in their tables, and how their answers in
//! milliseconds and numbers become the vocabulary of the store boundary.
//! Both keep the plain lock in a table of its own and the other kinds as
//! rows of holders and queue entries with a one-letter mode.

use std::borrow::Cow;
use std::time::Duration;

use super::{Attempt, Grant, StoredKeys};
use crate::error::StoreError;
use crate::inspect::{Holder, Inspection};
use crate::kind::LockKind;
use crate::token::FencingToken;
use crate::waiters::{Unlisted, Waiter};

/// A ttl in whole milliseconds, at least 1.
pub(super) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX).max(1)
}

/// A duration the server gave in milliseconds (none below zero).
pub(super) fn from_millis(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// A token the server gave (its counter starts at 1).
pub(super) fn token_of(token: i64) -> FencingToken {
    FencingToken::new(u64::try_from(token).unwrap_or(0))
}

/// The stored name of the lock of `kind` on the key: the plain lock's
/// borrowed, with no copy on its renewals and releases.
pub(super) fn name_of(keys: &StoredKeys, kind: LockKind) -> Cow<'_, str> {
    match kind {
        LockKind::Exclusive => Cow::Borrowed(keys.lease()),
        _ => Cow::Owned(keys.of_kind(kind)),
    }
}

/// How the holders' table names `kind`: its mode and its number of permits
/// or segments; `None` for the plain lock, which has a table of its own.
/// `store` names the store in the refusal of a size its column cannot hold.
pub(super) fn mode_of(
    kind: LockKind,
    store: &str,
) -> Result<Option<(&'static str, i32)>, StoreError> {
    let (mode, size) = match kind {
        LockKind::Exclusive => return Ok(None),
        LockKind::Fair => ("f", 0),
        LockKind::Read => ("r", 0),
        LockKind::Write => ("w", 0),
        LockKind::Permit { of } => ("p", of),
        LockKind::Segment { of } => ("s", of),
    };
    let size = i32::try_from(size).map_err(|_| {
        StoreError::permanent(format!(
            "a {store} store keeps at most {} permits or segments per key, not {size}",
            i32::MAX
        ))
    })?;
    Ok(Some((mode, size)))
}

/// The names of the key's locks of the kinds kept as holders' rows: fair,
/// read-write, permits, segments.
pub(super) fn other_kinds(keys: &StoredKeys) -> [String; 4] {
    [
        LockKind::Fair,
        LockKind::Write,
        LockKind::Permit { of: 1 },
        LockKind::Segment { of: 1 },
    ]
    .map(|kind| keys.of_kind(kind))
}

/// What a `take` answered for a lock of `kind` in `mode`, asked for `ttl`:
/// a token (and a segment `place`), or ask again within `wait` ms, with a
/// queue entry kept if `queued`; `stored` alone: the holders use that
/// number of permits or segments.
pub(super) struct Taken {
    pub(super) token: Option<i64>,
    pub(super) place: Option<i64>,
    pub(super) wait: Option<i64>,
    pub(super) queued: bool,
    pub(super) stored: Option<i64>,
}

impl Taken {
    /// The attempt this answer is.
    pub(super) fn attempt(
        self,
        kind: LockKind,
        mode: &str,
        ttl: Duration,
    ) -> Result<Attempt, StoreError> {
        if let (Some(stored), LockKind::Permit { of } | LockKind::Segment { of }) =
            (self.stored, kind)
        {
            let what = if mode == "s" { "segments" } else { "permits" };
            let stored = u32::try_from(stored).unwrap_or(0);
            return Err(StoreError::size_disagrees(what, of, stored));
        }
        let remaining = self.wait.map(from_millis);
        Ok(match (self.token, self.place) {
            (Some(token), Some(place)) if mode == "s" => {
                let grant = Grant::new(token_of(token), ttl);
                Attempt::Acquired(grant.with_segment(u32::try_from(place).unwrap_or(0)))
            }
            (Some(token), _) => Attempt::Acquired(Grant::new(token_of(token), ttl)),
            (None, _) if self.queued => Attempt::Queued { remaining },
            (None, _) => Attempt::Held { remaining },
        })
    }
}

/// One row of an inspection: its mode (`x` for the plain lock, `m` for a
/// waiting writer's mark), owner, token (0 for a queue entry), ms left, ms
/// since taken, segment, size, seq (a fair queue entry's place in line),
/// and whether a waiter marked the plain lock's lease.
pub(super) struct Inspected {
    pub(super) mode: String,
    pub(super) owner: String,
    pub(super) token: i64,
    pub(super) remaining_ms: i64,
    pub(super) age_ms: i64,
    pub(super) segment: i64,
    pub(super) size: i64,
    pub(super) seq: i64,
    pub(super) waited: bool,
}

impl Inspected {
    /// The kind of lock the row is of.
    fn kind(&self) -> LockKind {
        let size = u32::try_from(self.size).unwrap_or(0);
        match self.mode.as_str() {
            "f" => LockKind::Fair,
            "r" => LockKind::Read,
            "w" | "m" => LockKind::Write,
            "p" => LockKind::Permit { of: size },
            "s" => LockKind::Segment { of: size },
            _ => LockKind::Exclusive,
        }
    }

    /// The holder a row with a token is.
    fn holder(self) -> Holder {
        let mut holder = Holder::new(self.kind(), self.owner, token_of(self.token))
            .remaining(from_millis(self.remaining_ms))
            .age(from_millis(self.age_ms));
        if self.mode == "s" {
            holder = holder.segment(u32::try_from(self.segment).unwrap_or(0));
        }
        holder
    }
}

/// The inspection of `key` from its `rows`: the holders, and the queue
/// entries in line (the fair queue's by seq, then a waiting writer's mark).
pub(super) fn inspection(key: &str, rows: Vec<Inspected>) -> Inspection {
    let mut inspection = Inspection::new(key);
    let mut line = Vec::new();
    for row in rows {
        if row.waited {
            inspection.waiters.unlisted = Unlisted::SomeoneWaited;
        }
        if row.token != 0 {
            inspection.holders.push(row.holder());
            continue;
        }
        let kind = row.kind();
        line.push((
            kind != LockKind::Fair,
            row.seq,
            Waiter::new(kind, row.owner),
        ));
    }
    line.sort_by_key(|(writer, seq, _)| (*writer, *seq));
    for (.., waiter) in line {
        inspection.waiters.line_up(waiter);
    }
    inspection
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(mode: &str, owner: &str, token: i64, seq: i64) -> Inspected {
        Inspected {
            mode: mode.to_owned(),
            owner: owner.to_owned(),
            token,
            remaining_ms: 1_000,
            age_ms: 10,
            segment: 0,
            size: 0,
            seq,
            waited: false,
        }
    }

    #[test]
    fn queue_entries_are_listed_in_line_whatever_the_row_order() {
        let mut lease = row("x", "holder", 7, 0);
        lease.waited = true;
        let rows = vec![
            row("f", "third", 0, 30),
            row("m", "writer", 0, 0),
            lease,
            row("f", "first", 0, 10),
            row("f", "second", 0, 20),
            row("r", "reader", 8, 0),
        ];
        let seen = inspection("ledger", rows);
        let line: Vec<(LockKind, &str)> = seen
            .waiters
            .queue
            .iter()
            .map(|w| (w.kind, w.owner.as_str()))
            .collect();
        let expected = [
            (LockKind::Fair, "first"),
            (LockKind::Fair, "second"),
            (LockKind::Fair, "third"),
            (LockKind::Write, "writer"),
        ];
        assert_eq!(line, expected);
        assert_eq!(seen.waiters.queued, 4);
        assert_eq!(seen.waiters.unlisted, Unlisted::SomeoneWaited);
        let held: Vec<_> = seen
            .holders
            .iter()
            .map(|h| (h.kind, h.token.get()))
            .collect();
        assert_eq!(held, [(LockKind::Exclusive, 7), (LockKind::Read, 8)]);
    }
}
