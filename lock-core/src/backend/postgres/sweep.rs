//! The sweep: rows whose lease ended are removed by the next request on
//! their name, so a key nobody locks again would keep its last one; each
//! Locker runs the schema's `sweep()` about once a minute, which removes
//! rows that ended a minute ago or more, in bounded batches.

use std::time::Duration;

use super::Connections;
use super::schema::Sql;

/// How often a Locker sweeps.
const EVERY: Duration = Duration::from_secs(60);

/// The sweeping task, ended when dropped.
pub(super) struct Sweep(tokio::task::JoinHandle<()>);

impl Drop for Sweep {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Sweeps over `connections` with `sweep` until dropped.
pub(super) fn start(connections: Connections, sweep: Sql) -> Sweep {
    let task = tokio::spawn(async move {
        let mut every = tokio::time::interval_at(tokio::time::Instant::now() + EVERY, EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            // A failed sweep is tried again at the next tick.
            if let Err(err) = connections.query(&sweep, &[], true).await {
                tracing::debug!(error = %err, "PostgreSQL sweep failed");
            }
        }
    });
    Sweep(task)
}
