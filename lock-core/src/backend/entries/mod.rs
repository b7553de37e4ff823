//! What the etcd and ZooKeeper backends share: the table of the entries a
//! backend holds or waits with, with the reaper that ends unrenewed ones
//! at their ttl ([`held`]), requests asked for together ([`rounds`]), and
//! the task behind a waiter's signal.

mod held;
mod rounds;

pub(crate) use self::held::{Delete, Entry, Held, Leased, reap};
pub(crate) use self::rounds::{Round, RoundsTask};

/// Aborts a task when dropped (a waiter's watch task goes with its
/// signal).
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
