//! What a RedLock's masters hold, for operators: a holder is one that a
//! quorum of masters records; force-release ends, on every master, the
//! leases of the owners listed.

use std::collections::HashMap;

use super::RedLockBackend;
use crate::backend::stored_keys::StoredKeys;
use crate::backend::{LockStore, RedisBackend};
use crate::error::StoreError;
use crate::inspect::{ForceReleased, Holder, Inspection, Pattern};
use crate::kind::LockKind;
use crate::waiters::Unlisted;

impl RedLockBackend {
    /// The answers of every master, or the error of too few.
    fn quorum_of<T>(
        &self,
        what: &str,
        answers: Vec<Result<T, StoreError>>,
    ) -> Result<Vec<T>, StoreError> {
        let (oks, failures): (Vec<_>, Vec<_>) = answers.into_iter().partition(Result::is_ok);
        let oks: Vec<T> = oks.into_iter().filter_map(Result::ok).collect();
        if oks.len() >= self.quorum {
            return Ok(oks);
        }
        let failures = failures.into_iter().filter_map(Result::err).collect();
        Err(self.no_quorum(what, failures))
    }

    /// Holders on a quorum of the masters that answered, with the highest
    /// token, the least time left and the greatest age any of them says.
    pub(super) async fn inspection_of<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> Result<Inspection, StoreError> {
        let inspect = |backend: &'a RedisBackend| LockStore::inspect(backend, keys);
        let answers = self.on_masters(&self.masters, self.timeout, inspect).await;
        let seen = self.quorum_of("the inspection", answers)?;
        let mut by_owner: HashMap<(LockKind, String), (usize, Holder)> = HashMap::new();
        for holder in seen.iter().flat_map(|s| s.holders.iter()) {
            let entry = by_owner.entry((holder.kind, holder.owner.clone()));
            let (count, merged) = entry.or_insert_with(|| (0, holder.clone()));
            *count += 1;
            merged.token = merged.token.max(holder.token);
            merged.remaining = merged.remaining.min(holder.remaining);
            merged.age = merged.age.max(holder.age);
        }
        let mut inspection = Inspection::new(keys.user());
        inspection.holders = by_owner
            .into_values()
            .filter(|(count, _)| *count >= self.quorum)
            .map(|(_, holder)| holder)
            .collect();
        // The waiters as the master that lists the most has them; the
        // waiter mark as any master has it.
        let marked = seen
            .iter()
            .any(|s| s.waiters.unlisted == Unlisted::SomeoneWaited);
        let fullest = seen.iter().max_by_key(|s| s.waiters.queued);
        inspection.waiters = fullest.map(|s| s.waiters.clone()).unwrap_or_default();
        if marked {
            inspection.waiters.unlisted = Unlisted::SomeoneWaited;
        }
        Ok(inspection)
    }

    /// The keys any master that answers holds.
    pub(super) async fn held_keys_matching<'a>(
        &'a self,
        namespace: &'a str,
        pattern: &'a Pattern,
    ) -> Result<Vec<String>, StoreError> {
        let list = |backend: &'a RedisBackend| LockStore::held_keys(backend, namespace, pattern);
        let answers = self.on_masters(&self.masters, self.timeout, list).await;
        let lists = self.quorum_of("the listing", answers)?;
        Ok(lists.into_iter().flatten().collect())
    }

    /// Ends, on every master, the leases of the owners a quorum lists, each
    /// by its owner value. The masters answer one by one, and the first
    /// release wakes the waiters: one granted meanwhile holds under an owner
    /// value of its own, which masters reached later keep (a removal of
    /// whatever each master held took that waiter's lease away there). The
    /// tokens are those of the leases ended, raised ones included.
    pub(super) async fn force_release_all<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> Result<ForceReleased, StoreError> {
        let inspect = |backend: &'a RedisBackend| LockStore::inspect(backend, keys);
        let answers = self.on_masters(&self.masters, self.timeout, inspect).await;
        let seen = self.quorum_of("the force-release", answers)?;
        let mut owners: Vec<&str> = seen
            .iter()
            .flat_map(|seen| seen.holders.iter())
            .filter(|holder| holder.kind == LockKind::Exclusive)
            .map(|holder| holder.owner.as_str())
            .collect();
        owners.sort_unstable();
        owners.dedup();
        let (mut removed, mut up_to) = (0, None);
        for owner in owners {
            let end = |backend: &'a RedisBackend| backend.force_release_owner(keys, owner);
            let answers = self.on_masters(&self.masters, self.timeout, end).await;
            let ended = self.quorum_of("the force-release", answers)?;
            let highest = ended.into_iter().flatten().max();
            removed += usize::from(highest.is_some());
            up_to = up_to.max(highest);
        }
        Ok(ForceReleased::new(removed, up_to))
    }
}
