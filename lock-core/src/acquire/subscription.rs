//! [`Subscription`]: how the front of a local queue waits for a release
//! without polling.

use std::time::Duration;

use tokio::time::{Instant, sleep_until};

use crate::acquire::Acquisition;
use crate::backend::ReleaseSignal;
use crate::error::{LockError, Operation};

/// Without a release channel, waiters look again at least this often.
const POLL_WITHOUT_CHANNEL: Duration = Duration::from_millis(100);

/// A waiter's subscription to the releases of the lock it waits for.
#[derive(Default)]
pub(crate) struct Subscription {
    signal: Option<ReleaseSignal>,
    /// The queue entry the signal was asked for, if any (a waiter with a
    /// queue entry hears when it may go; an acquire that starts over has a new
    /// owner value).
    queued_owner: Option<String>,
    /// Subscribing cannot work (the store has no channel): poll instead.
    failed: bool,
}

impl Subscription {
    /// Waits for the release of the lock `acquisition` wants (for the
    /// waiter with `queued_owner`, when it may go): subscribes first if there is no
    /// subscription for it yet (and returns at once, so that the caller
    /// tries again with no release missed), else sleeps until a release
    /// message, the holders' `remaining` time or the `deadline`.
    pub(crate) async fn wait_for_release(
        &mut self,
        acquisition: &Acquisition,
        queued_owner: Option<&str>,
        remaining: Option<Duration>,
        deadline: Instant,
    ) -> Result<(), LockError> {
        let keys = &acquisition.keys;
        if self.queued_owner.as_deref() != queued_owner {
            self.signal = None;
        }
        if self.signal.is_none() && !self.failed {
            let backend = &acquisition.locker.backend();
            let subscribe = backend.subscribe(keys, acquisition.kind, queued_owner);
            match tokio::time::timeout_at(deadline, subscribe).await {
                Ok(Ok(signal)) => {
                    self.signal = Some(signal);
                    self.queued_owner = queued_owner.map(str::to_owned);
                    return Ok(());
                }
                // A cut connection: poll this time, subscribe again next.
                Ok(Err(err)) if err.is_transient() => {
                    tracing::debug!(key = %keys.user(), error = %err, "subscribing failed; polling until it works");
                }
                // A store that refuses this client's subscription (an ACL
                // without the channel) is told, not polled around.
                Ok(Err(err)) if err.refusal().is_some() => {
                    let key = keys.user();
                    return Err(LockError::from_store(key, Operation::Subscribe, err));
                }
                Ok(Err(err)) => {
                    tracing::debug!(key = %keys.user(), error = %err, "no release channel; polling");
                    self.failed = true;
                }
                Err(_) => return Ok(()),
            }
        }
        let now = Instant::now();
        // At least a millisecond: a lease about to expire must not spin.
        let left = remaining
            .unwrap_or(acquisition.ttl)
            .max(Duration::from_millis(1));
        let mut wake_at = now + left;
        if self.signal.is_none() {
            wake_at = wake_at.min(now + POLL_WITHOUT_CHANNEL);
        }
        let wake_at = wake_at.min(deadline);
        match self.signal.as_mut() {
            Some(signal) => {
                tokio::select! {
                    open = signal.released() => if !open {
                        // The channel's connection dropped: subscribe again.
                        self.signal = None;
                    },
                    _ = sleep_until(wake_at) => {}
                }
            }
            None => sleep_until(wake_at).await,
        }
        Ok(())
    }
}
