//! The ZooKeeper backend's own promises, beyond the conformance suite
//! (which runs on a standalone server too): the session timeout is the
//! ttl granted, a connection lost for less than the session keeps the
//! locks, an expired session is told on every guard in it, waiting without
//! requests, `zk://` URLs, a follower cut off from its leader is not
//! trusted to renew, and an observer hears of a grant's write.

use std::time::Duration;

use futures_util::StreamExt;
use lock_core::{LockError, Locker};
use lock_testkit::{TestStore, ZooKeeperServer, zookeeper_client};
use tokio::time::{Instant, timeout};
use zookeeper_client::{Acls, CreateMode};

use crate::conformance::SLACK;

async fn locker(server: &ZooKeeperServer, ttl: Duration) -> Locker {
    Locker::builder()
        .ttl(ttl)
        .zookeeper(&server.address())
        .await
        .expect("connect to the test ZooKeeper")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_timeout_is_the_ttl_granted() {
    let server = ZooKeeperServer::start();
    let locker = locker(&server, Duration::from_secs(30)).await;
    // The kit's server agrees to sessions of 200 ms (2 ticks) to 60 s.
    let cases = [(100, 200), (1500, 1500), (90_000, 60_000)];
    for (asked, granted) in cases {
        let guard = locker
            .lock(format!("ttl:{asked}"))
            .ttl(Duration::from_millis(asked))
            .await
            .unwrap();
        assert_eq!(
            guard.ttl(),
            Duration::from_millis(granted),
            "asked {asked} ms"
        );
        assert!(guard.expires_in() <= guard.ttl());
        guard.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_outage_keeps_the_locks_and_an_expired_session_loses_them() {
    let server = ZooKeeperServer::start();
    let ttl = Duration::from_secs(4);
    let holder = locker(&server, ttl).await;
    let guards = [
        holder.lock("outage:0").await.unwrap(),
        holder.lock("outage:1").await.unwrap(),
    ];
    // Frozen for a quarter of the session: the client reconnects within
    // it, and the locks stand.
    server.pause();
    tokio::time::sleep(ttl / 4).await;
    server.resume();
    tokio::time::sleep(ttl / 2).await;
    assert!(
        guards.iter().all(|g| g.is_held()),
        "a short outage lost a lock"
    );
    // Frozen for twice the session: the server expires it on waking, and
    // every guard in it is told.
    server.pause();
    tokio::time::sleep(2 * ttl).await;
    server.resume();
    for guard in &guards {
        let told = tokio::time::timeout(ttl / 3 + SLACK, guard.lost()).await;
        assert!(matches!(told, Ok(LockError::Lost { .. })), "{told:?}");
    }
    // The Locker goes on with a new session; tokens rise.
    let again = holder.lock("outage:0").await.unwrap();
    assert!(again.token() > guards[0].token());
    again.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_urls_name_the_ensemble_and_a_chroot() {
    let server = ZooKeeperServer::start();
    let url = format!(
        "{}/app",
        ZooKeeperServer::url(std::slice::from_ref(&server))
    );
    let locker = Locker::connect(&url).await.unwrap();
    let guard = locker.lock("by-url").await.unwrap();
    guard.release().await.unwrap();
    for bad in ["zk://127.0.0.1", "zk://127.0.0.1:2181/", "zk://:2181"] {
        let err = Locker::connect(bad).await.unwrap_err();
        assert!(matches!(err, LockError::InvalidUrl { .. }), "{bad}: {err}");
    }
    // Nothing listens on port 1.
    let err = Locker::builder()
        .timeout(Duration::from_millis(500))
        .connect("zk://127.0.0.1:1")
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::Unavailable { .. }), "{err}");
}

/// Packets the client connections have sent to `server`, all together
/// (pings included).
fn packets(server: &ZooKeeperServer) -> u64 {
    let cons = server.four_letters("cons").expect("cons");
    cons.lines()
        .filter_map(|line| {
            line.split("recved=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_sends_nothing_but_pings_while_it_waits() {
    let store = TestStore::zookeeper();
    let TestStore::ZooKeeper(server) = &store else {
        unreachable!("a ZooKeeper store")
    };
    let ttl = Duration::from_secs(60);
    let holder = store.locker_with(|l| l.ttl(ttl)).await.0;
    let (waiter, counts) = store.locker_with(|l| l.ttl(ttl)).await;
    let held = holder.lock("quiet").await.unwrap();
    let waiting =
        tokio::spawn(async move { waiter.lock("quiet").wait(Duration::from_secs(20)).await });
    // Refused twice (before and after subscribing): it waits on its watch.
    counts.acquires_reach(2).await;
    let before = packets(server);
    // The hold is the point: a waiter that polled every 100 ms would send
    // about 15 requests; each of the 4 sessions (2 per Locker) pings every
    // third of its timeout (20 s at most).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let sent = packets(server) - before;
    assert!(sent <= 4, "{sent} packets while waiting");
    held.release().await.unwrap();
    let next = tokio::time::timeout(SLACK, waiting)
        .await
        .expect("woken by the release")
        .unwrap()
        .unwrap();
    next.release().await.unwrap();
}

/// A renewal round through a follower cut off from its leader, while the
/// session expires on the leader: the follower still finds the node in
/// its own copy, but the `sync` that goes first gets no answer, so the
/// loss is told at the lease's end instead of a stale read being trusted;
/// and a Locker on the leader's side takes the key once the session has
/// expired there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_cut_off_from_its_leader_does_not_renew() {
    let ttl = Duration::from_secs(1);
    // A follower trusts its leader for 6 s, far past the session.
    let (servers, links) = ZooKeeperServer::ensemble_with_links(3, 60).await;
    let leader = (0..3).find(|&i| servers[i].leads()).expect("a leader");
    let follower = (0..3).find(|&i| i != leader).unwrap();
    let cut_off = Locker::builder()
        .ttl(ttl)
        .timeout(Duration::from_millis(300))
        .zookeeper(&servers[follower].address())
        .await
        .expect("connect to the follower");
    let guard = cut_off.lock("stale").await.unwrap();
    // Held, not cut: a cut link makes the follower drop its clients at
    // once, and the stale read under test would never happen.
    let link = links.between(follower, leader);
    link.hold();
    link.hold_replies();
    let cut = Instant::now();
    let lost = tokio::time::timeout(ttl + SLACK, guard.lost()).await;
    assert!(
        lost.is_ok(),
        "still held {:?} after the cut: renewed on the follower's stale copy",
        cut.elapsed()
    );
    let other = Locker::builder()
        .zookeeper(&servers[leader].address())
        .await
        .expect("connect to the leader");
    let taken = other.lock("stale").wait(Duration::from_secs(5)).await;
    let taken = taken.expect("the session never expired on the leader");
    taken.release().await.unwrap();
    link.release();
}

/// An uncontended lock of a fresh key costs 3 requests: its parent and node
/// made in one multi (the node is the parent's first, so no read of the
/// children), the token's write, and the delete. Packets are counted at the
/// server; a ping in between would add one, so the least of a few tries is
/// taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncontended_lock_of_a_fresh_key_costs_three_requests() {
    let store = TestStore::zookeeper();
    let TestStore::ZooKeeper(server) = &store else {
        unreachable!("a ZooKeeper store")
    };
    let locker = store
        .locker_with(|l| l.ttl(Duration::from_secs(60)))
        .await
        .0;
    // The session is made by the first lock, not counted.
    locker.lock("warm").await.unwrap().release().await.unwrap();
    let mut least = u64::MAX;
    for i in 0..5 {
        let before = packets(server);
        let guard = locker.lock(format!("fresh:{i}")).await.unwrap();
        guard.release().await.unwrap();
        least = least.min(packets(server) - before);
    }
    assert_eq!(least, 3, "requests per lock + release of a fresh key");
}

/// An observer that read a node first in line before its grant was written
/// is told of the leader when the write lands, though the write changes no
/// child of the key (all an observer watched before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_is_told_of_a_grant_written_after_it_looked() {
    let server = ZooKeeperServer::start();
    let observer = locker(&server, Duration::from_secs(60)).await;
    let client = zookeeper_client(&server).await;
    // A node first in line and not written yet, made by hand under the
    // key's parent while a lock keeps the parent.
    let guard = observer.lock("relay").await.unwrap();
    let parents = client.list_children("/").await.unwrap();
    let parent = parents
        .iter()
        .find(|p| p.ends_with("{relay}:lease"))
        .unwrap();
    let mode = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
    let prefix = format!("/{parent}/by-hand-x-");
    let (_, sequence) = client.create(&prefix, &[], &mode).await.unwrap();
    let node = format!("{prefix}{sequence}");
    guard.release().await.unwrap();
    let mut changes = observer.observe("relay");
    let first = changes.next().await.unwrap().unwrap();
    assert_eq!(
        first, None,
        "a node whose grant is not written leads nobody"
    );
    let written = client.set_data(&node, &[], None).await.unwrap();
    let told = timeout(SLACK * 2, changes.next())
        .await
        .expect("the grant's write is told, not found at a lease's end")
        .unwrap()
        .unwrap()
        .expect("a leader");
    assert_eq!(told.owner, "by-hand");
    assert_eq!(Ok(told.token.get()), u64::try_from(written.mzxid));
}
