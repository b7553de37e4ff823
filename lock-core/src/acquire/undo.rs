//! [`UndoOnDrop`]: the release of an acquire that may have taken a lock
//! nobody will hold.

use std::sync::Arc;

use tokio::time::Instant;

use crate::acquire::Acquisition;
use crate::backend::release_until;
use crate::owner::Owner;

/// Releases by owner value in the background if dropped while an acquire
/// with the current owner value may have taken the lock: one on its way
/// (the future was dropped mid-request), or one whose outcome is unknown
/// (timed out, or its connection broke after sending).
pub(crate) struct UndoOnDrop<'a> {
    acquisition: &'a Acquisition,
    owner: Option<Owner>,
    /// A request with the current owner value is on its way.
    pub(crate) sending: bool,
    /// An earlier request with it may have taken the lock.
    pub(crate) in_doubt: bool,
}

impl<'a> UndoOnDrop<'a> {
    /// Disarmed, with a fresh owner value.
    pub(crate) fn new(acquisition: &'a Acquisition) -> Self {
        UndoOnDrop {
            acquisition,
            owner: Some(acquisition.new_owner()),
            sending: false,
            in_doubt: false,
        }
    }

    /// The owner value the next attempt is sent with.
    pub(crate) fn owner(&self) -> &str {
        self.owner
            .as_ref()
            .expect("the owner value is taken only on success")
            .as_str()
    }

    /// The lease is ours: hand over the owner value.
    pub(crate) fn disarm(&mut self) -> Owner {
        (self.sending, self.in_doubt) = (false, false);
        self.owner.take().expect("disarmed once")
    }

    /// Releases by the current owner value in the background, again while
    /// the store fails transiently (until a lease it took would have ended);
    /// later attempts use a fresh owner value, so that release cannot touch
    /// them.
    pub(crate) fn fire(&mut self) {
        (self.sending, self.in_doubt) = (false, false);
        let Some(owner) = self.owner.as_mut() else {
            return;
        };
        let fresh = self.acquisition.new_owner();
        let owner = std::mem::replace(owner, fresh);
        let (keys, kind) = (self.acquisition.keys.clone(), self.acquisition.kind);
        let backend = Arc::clone(self.acquisition.locker.backend());
        // The latest send of the acquire was before now: its lease ends by then.
        let runs_out = Instant::now() + self.acquisition.ttl;
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let owner = owner.as_str();
                if let Err(err) = backend.release(&keys, kind, owner).await
                    && err.is_transient()
                {
                    release_until(&*backend, &keys, kind, owner, runs_out).await;
                }
            });
        }
    }
}

impl UndoOnDrop<'_> {
    /// Withdraws the queue entry of an acquire that gives up, before it returns:
    /// whoever asks next must not find it still standing ahead of them. A
    /// failed release (or a dropped future) falls back to [`fire`](Self::fire).
    pub(crate) async fn withdraw(&mut self) {
        let Some(owner) = self.owner.as_ref() else {
            return;
        };
        let acquisition = self.acquisition;
        let backend = &acquisition.locker.backend();
        let released = backend
            .release(&acquisition.keys, acquisition.kind, owner.as_str())
            .await;
        match released {
            Ok(_) => (self.sending, self.in_doubt) = (false, false),
            Err(_) => self.fire(),
        }
    }
}

impl Drop for UndoOnDrop<'_> {
    fn drop(&mut self) {
        if self.sending || self.in_doubt {
            self.fire();
        }
    }
}
