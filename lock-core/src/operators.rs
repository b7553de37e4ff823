//! The operators' calls on a [`Locker`]: what holds a key, which keys are
//! held, and breaking a lock by force.

use crate::error::{LockError, Operation};
use crate::inspect::{Inspection, MAX_LISTED, Pattern};
use crate::keys::StoredKeys;
use crate::locker::Locker;

impl Locker {
    /// What the store holds for `key`: each holder of each kind of lock
    /// on it (owner, process, token, remaining lease, age), and the
    /// waiters where the store keeps queue entries. One read; nothing changes.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn inspect(&self, key: &str) -> Result<Inspection, LockError> {
        let keys = StoredKeys::new(self.namespace(), key)?;
        let backend = &self.backend();
        backend
            .inspect(&keys)
            .await
            .map_err(|err| LockError::from_store(key, Operation::Inspect, err))
    }

    /// The keys of this Locker's namespace held now whose user key matches
    /// `pattern` (`*` any run of characters, `?` one), at most
    /// [`MAX_LISTED`], in no set order. On Redis this scans the keyspace:
    /// a tool for operators, not for a request path.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn held_keys(&self, pattern: &str) -> Result<Vec<String>, LockError> {
        let namespace = self.namespace();
        let matching = Pattern::new(pattern);
        let mut keys = self
            .backend()
            .held_keys(namespace, &matching)
            .await
            .map_err(|err| LockError::from_store(pattern, Operation::Inspect, err))?;
        keys.sort();
        keys.dedup();
        keys.truncate(MAX_LISTED);
        Ok(keys)
    }

    /// Removes every holder of every kind of lock on `key`, and every
    /// waiter's queue entry, whoever they are: for an operator whose holder is
    /// wedged but still renewing. Returns how many entries it removed.
    ///
    /// Each holder loses its lease: its next renewal finds it gone and its
    /// guard reports [`LockError::Lost`] through `lost()`. Until then it
    /// still believes it holds, so the next holder may overlap it: the next
    /// holder's fencing token is higher, and fenced writes reject the old
    /// holder's. Logged at `warn` with this Locker's label.
    ///
    /// # Cancel safety
    /// Not cancel safe: dropped midway, some entries may be gone and others
    /// not; call it again.
    pub async fn force_release(&self, key: &str) -> Result<usize, LockError> {
        let keys = StoredKeys::new(self.namespace(), key)?;
        let removed = self
            .backend()
            .force_release(&keys)
            .await
            .map_err(|err| LockError::from_store(key, Operation::ForceRelease, err))?;
        tracing::warn!(
            key,
            removed,
            by = %format_args!("{}/pid {}", self.config().label, std::process::id()),
            "lock force-released: its holders lose their leases"
        );
        Ok(removed)
    }
}
