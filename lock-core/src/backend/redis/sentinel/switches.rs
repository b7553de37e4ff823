//! Hearing of a failover as the sentinels announce it.
//!
//! After a failover the former master goes on accepting writes until the
//! sentinels get round to demoting it (about 8 s after the switch, in
//! Redis 7), so a client that waits for `READONLY` or a broken connection
//! keeps renewing its leases there while new clients take the same locks
//! on the new master. So each [`SentinelMaster`] listens on every
//! sentinel's `+switch-master` channel, and forgets the master as soon as
//! the first of them announces that it moved.

use std::sync::Weak;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::watch;

use super::SentinelMaster;

/// Pause before listening again on a sentinel that was lost.
const LISTEN_AGAIN_AFTER: Duration = Duration::from_millis(250);

/// Listens for switches of `master` on each of `sentinels`, until `stop`'s
/// sender or the master is dropped.
pub(super) fn watch(
    master: &Weak<SentinelMaster>,
    sentinels: Vec<redis::Client>,
    stop: &watch::Receiver<()>,
) {
    for sentinel in sentinels {
        let (master, mut stop) = (master.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = listen(&master, &sentinel) => {}
                    _ = stop.changed() => return,
                }
                if master.strong_count() == 0 {
                    return;
                }
                tokio::time::sleep(LISTEN_AGAIN_AFTER).await;
            }
        });
    }
}

/// Forgets the master on each of its switches announced by `sentinel`,
/// while that sentinel stays reachable.
async fn listen(master: &Weak<SentinelMaster>, sentinel: &redis::Client) {
    let Some(timeout) = master.upgrade().map(|m| m.timeout) else {
        return;
    };
    let subscribed = tokio::time::timeout(timeout, async {
        let mut pubsub = sentinel.get_async_pubsub().await?;
        pubsub.subscribe("+switch-master").await?;
        Ok::<_, redis::RedisError>(pubsub)
    });
    let Ok(Ok(mut pubsub)) = subscribed.await else {
        let address = sentinel.get_connection_info().addr();
        tracing::debug!(sentinel = %address, "cannot listen for failovers on this sentinel");
        return;
    };
    let Some(name) = master.upgrade().map(|m| m.name.clone()) else {
        return;
    };
    let mut messages = pubsub.on_message();
    while let Some(message) = messages.next().await {
        // `<name> <old-ip> <old-port> <new-ip> <new-port>`
        let payload: String = message.get_payload().unwrap_or_default();
        let words: Vec<&str> = payload.split(' ').collect();
        let [named, _, _, ip, port] = words.as_slice() else {
            continue;
        };
        if *named != name {
            continue;
        }
        let Some(master) = master.upgrade() else {
            return;
        };
        master.moved_to(ip, port.parse().unwrap_or(0), &payload);
    }
}
