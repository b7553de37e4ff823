//! Waking waiters without `LISTEN`: behind a transaction-pooling proxy a
//! `LISTEN` lasts one transaction, so where no direct `listen_url` is
//! given, every waiter of the Locker is woken each [`INTERVAL`] and asks
//! again (one statement per waiter per interval, and never later than the
//! holder's lease runs out).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::backend::ReleaseSignal;

/// How often a polled waiter asks again.
pub(super) const INTERVAL: Duration = Duration::from_millis(250);

/// The ticking task and the signal it feeds.
pub(super) struct Poll {
    ticks: Arc<watch::Sender<u64>>,
    task: JoinHandle<()>,
}

impl Poll {
    /// Starts ticking.
    pub(super) fn start() -> Self {
        let ticks = Arc::new(watch::Sender::new(0u64));
        let task = tokio::spawn({
            let ticks = Arc::clone(&ticks);
            async move {
                let mut every = tokio::time::interval(INTERVAL);
                every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    every.tick().await;
                    ticks.send_modify(|n| *n = n.wrapping_add(1));
                }
            }
        });
        Poll { ticks, task }
    }

    /// A signal that fires at the next tick and each one after.
    pub(super) fn subscribe(&self) -> ReleaseSignal {
        ReleaseSignal::new(self.ticks.subscribe(), ())
    }
}

impl Drop for Poll {
    fn drop(&mut self) {
        self.task.abort();
    }
}
