//! What the memory store holds, for operators: inspection, the keys held
//! and force-release.

use tokio::time::Instant;

use super::entries::Entries;
use super::{MemoryBackend, State};
use crate::backend::key_shards::SHARDS;
use crate::backend::stored_keys::{KeyMap, StoredKeys};
use crate::inspect::{ForceReleased, Holder, Inspection, MAX_LISTED, Pattern};
use crate::kind::LockKind;

impl State {
    /// Removes every kind of lock on `keys`; whether anything was there.
    pub(super) fn remove_every_kind(&mut self, keys: &StoredKeys) -> bool {
        let kinds = [
            self.leases.remove(keys).is_some(),
            self.fair.remove(keys).is_some(),
            self.rw.remove(keys).is_some(),
            self.permits.remove(keys).is_some(),
            self.segments.remove(keys).is_some(),
        ];
        kinds.contains(&true)
    }

    /// The live holders and queue entries of every kind of lock on `keys`.
    fn inspect(&self, keys: &StoredKeys, now: Instant) -> Inspection {
        let mut seen = Inspection::new(keys.user());
        if let Some(lease) = self.leases.get(keys).filter(|l| l.expires > now) {
            let holder = Holder::new(LockKind::Exclusive, lease.owner.as_str(), lease.token);
            seen.holders.push(holder.remaining(lease.expires - now));
        }
        let kinds: [(&dyn Inspect, bool); 4] = [
            (&self.fair, false),
            (&self.rw, false),
            (&self.permits, false),
            (&self.segments, true),
        ];
        for (map, segments) in kinds {
            map.inspect(keys, now, segments, &mut seen);
        }
        seen
    }
}

/// A map of one kind of lock, inspected by key.
trait Inspect {
    fn inspect(&self, keys: &StoredKeys, now: Instant, segments: bool, seen: &mut Inspection);
}

impl<E: Entries> Inspect for KeyMap<E> {
    fn inspect(&self, keys: &StoredKeys, now: Instant, segments: bool, seen: &mut Inspection) {
        if let Some(entries) = self.get(keys) {
            entries.inspect(now, segments, seen);
        }
    }
}

impl MemoryBackend {
    pub(super) fn inspect_now(&self, keys: &StoredKeys) -> Inspection {
        self.lock_state(keys).inspect(keys, Instant::now())
    }

    pub(super) fn held_keys_now(&self, namespace: &str, pattern: &Pattern) -> Vec<String> {
        let prefix = format!("{namespace}:{{");
        let now = Instant::now();
        let mut held = Vec::new();
        for shard in 0..SHARDS {
            let state = self.store.shards.lock(shard);
            let names = state
                .leases
                .iter()
                .filter(|(_, lease)| lease.expires > now)
                .map(|(keys, _)| keys)
                .chain(state.fair.keys())
                .chain(state.rw.keys())
                .chain(state.permits.keys())
                .chain(state.segments.keys());
            held.extend(
                names
                    .filter(|keys| {
                        keys.lease().starts_with(&prefix) && pattern.matches(keys.user())
                    })
                    .map(|keys| keys.user().to_owned())
                    .take(MAX_LISTED),
            );
        }
        held
    }

    pub(super) fn force_release_now(&self, keys: &StoredKeys) -> ForceReleased {
        let mut state = self.lock_state(keys);
        let seen = state.inspect(keys, Instant::now());
        state.remove_every_kind(keys);
        state.publish(keys);
        let highest = seen.holders.iter().map(|holder| holder.token).max();
        ForceReleased::new(seen.holders.len() + seen.waiters.queued, highest)
    }
}
