//! The sweep of the SQL stores: rows whose lease ended are removed by the
//! next request on their name, so a key nobody locks again would keep its
//! last one; each Locker runs its store's sweep about once a minute, which
//! removes rows that ended a minute ago or more, in bounded batches.

use std::future::Future;
use std::time::Duration;

use crate::error::StoreError;

/// How often a Locker sweeps.
const EVERY: Duration = Duration::from_secs(60);

/// The sweeping task, ended when dropped.
pub(super) struct Sweep(tokio::task::JoinHandle<()>);

impl Drop for Sweep {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs `sweep` every minute until dropped; `store` names it in the log of
/// a sweep that failed (tried again at the next tick).
pub(super) fn start<F, Swept>(store: &'static str, mut sweep: F) -> Sweep
where
    F: FnMut() -> Swept + Send + 'static,
    Swept: Future<Output = Result<(), StoreError>> + Send,
{
    let task = tokio::spawn(async move {
        let mut every = tokio::time::interval_at(tokio::time::Instant::now() + EVERY, EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            if let Err(err) = sweep().await {
                tracing::debug!(error = %err, "{store} sweep failed");
            }
        }
    });
    Sweep(task)
}
