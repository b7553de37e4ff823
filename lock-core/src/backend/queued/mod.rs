//! What the stores that queue entries (etcd, ZooKeeper) share: who holds
//! in a queue ([`admission`]), the table of the entries a backend holds or
//! waits with, with the reaper that ends unrenewed ones at their ttl
//! ([`held`]), requests asked for together ([`batching`]), and the task
//! behind a waiter's signal.

pub(crate) mod admission;
mod batching;
mod held;

pub(crate) use self::batching::{BatchWork, LazyBatchRunner};
pub(crate) use self::held::{Delete, Entry, Held, Leased, reap};

/// The segments of `of` in the order `owner` tries them: from one of its
/// own, so that contenders spread out.
pub(crate) fn spread(owner: &str, of: u32) -> impl Iterator<Item = u32> {
    let start = owner
        .bytes()
        .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    (0..of).map(move |i| start.wrapping_add(i) % of)
}

/// Aborts a task when dropped (a waiter's watch task goes with its
/// signal).
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
