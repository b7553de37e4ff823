//! The operators' calls on a [`Locker`]: what holds a key, which keys are
//! held, and breaking a lock by force.

use crate::backend::stored_keys::StoredKeys;
use crate::error::{LockError, Operation};
use crate::inspect::{ForceReleased, Inspection, MAX_LISTED, Pattern};
use crate::locker::Locker;
use crate::token::FencingToken;

impl Locker {
    /// What the store holds for `key`: each holder of each kind of lock
    /// on it (owner, process, token, remaining lease, age), and the
    /// waiters where the store keeps queue entries. One read; nothing changes.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn inspect(&self, key: impl AsRef<str>) -> Result<Inspection, LockError> {
        let key = key.as_ref();
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
    pub async fn held_keys(&self, pattern: impl AsRef<str>) -> Result<Vec<String>, LockError> {
        let pattern = pattern.as_ref();
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
    /// wedged but still renewing. Returns how many entries it removed, and a
    /// token at least as high as theirs and below every later grant's.
    ///
    /// It removes them all at once (one script, transaction or multi), or on
    /// RedLock by owner value, so that nothing it wakes is granted until
    /// they are gone: a waiter granted once it has run keeps its grant.
    /// Waiters whose queue entries it removed are woken and line up again.
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
    pub async fn force_release(&self, key: impl AsRef<str>) -> Result<ForceReleased, LockError> {
        let key = key.as_ref();
        let keys = StoredKeys::new(self.namespace(), key)?;
        let forced = self
            .backend()
            .force_release(&keys)
            .await
            .map_err(|err| LockError::from_store(key, Operation::ForceRelease, err))?;
        let by = format!("{}/pid {}", self.config().label, std::process::id());
        if forced.removed == 0 {
            tracing::debug!(key, %by, "force-release found nothing to remove");
            return Ok(forced);
        }
        tracing::warn!(
            key,
            removed = forced.removed,
            tokens_up_to = forced.tokens_up_to.map(FencingToken::get),
            %by,
            "lock force-released: its holders lose their leases"
        );
        Ok(forced)
    }
}
