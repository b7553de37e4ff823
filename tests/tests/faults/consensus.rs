//! The consensus stores' scenarios, each on etcd and on ZooKeeper: a
//! server of 3 lost under load (etcd's leader, a ZooKeeper server), and a
//! client frozen past its lease (an etcd lease, a ZooKeeper session). Lock
//! clients are OS processes on an `etcd://` or `zk://` URL; fenced writes
//! go to a Redis data server, and the history checker judges both.

use std::time::Duration;

use lock_testkit::history::{Event, now_ms};
use lock_testkit::{EtcdServer, RedisServer, ZooKeeperServer};

use crate::harness::{Clients, Workers, assert_history, facts, one_at_a_time, store_histories};
use crate::scenarios::blocking;

/// Which of `members` leads (asked of each member itself).
async fn etcd_leader(members: &[EtcdServer]) -> usize {
    for (i, member) in members.iter().enumerate() {
        let mut client = lock_testkit::etcd_client(member).await;
        let status = client.status().await.expect("member status");
        let me = status.header().expect("a header").member_id();
        if status.leader() == me {
            return i;
        }
    }
    panic!("no member leads");
}

/// Four clients on two keys (two hold while two wait), 60 operations
/// each, on `url` with lease `ttl`; `kill` takes a server down after 20
/// acquisitions. Returns the checked events and when the kill came.
pub(crate) async fn a_server_lost_under_load(
    url: String,
    ttl: Duration,
    kill: impl FnOnce() + Send + 'static,
) -> (Vec<Event>, u64) {
    let data = RedisServer::start();
    let mut clients = Clients::new();
    let shape = Workers {
        count: 4,
        keys: 2,
        ops: 60,
        ttl,
        work: Duration::from_millis(10),
    };
    clients.spawn_workers(&url, &data, shape);
    let (events, pauses, killed_at) = blocking(move || {
        for _ in 0..20 {
            clients.wait_for(|e| e.kind == "acquire_ok");
        }
        let killed_at = now_ms();
        kill();
        let (events, pauses) = clients.finish();
        (events, pauses, killed_at)
    })
    .await;
    let summary = assert_history(
        &events,
        &facts(ttl, pauses, store_histories(&data, 2).await),
    );
    let after = events
        .iter()
        .filter(|e| e.kind == "acquire_ok" && e.at > killed_at)
        .count();
    assert!(after >= 100, "{after} acquisitions after the server died");
    assert!(summary.acquired >= 200, "{summary:?}");
    (events, killed_at)
}

/// Three clients on one key with 100 ms of work inside; the holder of a
/// fresh acquisition is frozen for `frozen`, past its lease of `ttl`: it
/// must be told, its writes rejected, and a later holder's token higher.
pub(crate) async fn a_client_frozen_past_its_lease(url: String, ttl: Duration, frozen: Duration) {
    let data = RedisServer::start();
    let mut clients = Clients::new();
    let shape = Workers {
        count: 3,
        keys: 1,
        ops: 15,
        ttl,
        work: Duration::from_millis(100),
    };
    clients.spawn_workers(&url, &data, shape);
    let (events, pauses, held) = blocking(move || {
        // A fresh acquisition: its holder is inside its 100 ms of work.
        let held = clients.wait_for(|e| e.kind == "acquire_ok" && e.at + 40 >= now_ms());
        clients.freeze(&held.client, frozen);
        let (events, pauses) = clients.finish();
        (events, pauses, held)
    })
    .await;
    let told = events
        .iter()
        .any(|e| e.kind == "lost" && e.client == held.client && e.token == held.token);
    assert!(
        told,
        "{} was frozen past its lease but not told",
        held.client
    );
    let taken_meanwhile = events
        .iter()
        .any(|e| e.kind == "acquire_ok" && e.client != held.client && e.token > held.token);
    assert!(
        taken_meanwhile,
        "nobody took the lock from the frozen client"
    );
    let summary = assert_history(
        &events,
        &facts(ttl, pauses, store_histories(&data, 1).await),
    );
    let rejected = events
        .iter()
        .filter(|e| e.kind == "write_rejected" && e.client == held.client && e.token == held.token)
        .count();
    assert_eq!(
        rejected, 2,
        "the frozen client's writes passed the fence: {summary:?}"
    );
}

/// e1. etcd: the leader of 3 killed while locks are held and waited on:
/// the other two elect a new one, no two holders pass the fence together,
/// and tokens keep rising.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e01_leader_of_three_killed_while_held_and_waited() {
    let _one_at_a_time = one_at_a_time().await;
    let members = EtcdServer::cluster(3);
    let lead = etcd_leader(&members).await;
    let url = EtcdServer::url(&members);
    let members = std::sync::Arc::new(std::sync::Mutex::new(members));
    let kill = {
        let members = std::sync::Arc::clone(&members);
        move || members.lock().unwrap()[lead].kill()
    };
    a_server_lost_under_load(url, Duration::from_secs(2), kill).await;
}

/// e2. etcd: a client frozen (SIGSTOP) past its lease: etcd revokes the
/// lease, another client takes the lock with a higher token, and the
/// thawed client is told and fenced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e02_client_frozen_past_its_lease_is_told_and_fenced() {
    let _one_at_a_time = one_at_a_time().await;
    let member = EtcdServer::start();
    let ttl = Duration::from_secs(1);
    // etcd revokes an expired lease within half a second of its ttl.
    a_client_frozen_past_its_lease(EtcdServer::url(std::slice::from_ref(&member)), ttl, 3 * ttl)
        .await;
}

/// z1. ZooKeeper: the leader of an ensemble of 3 killed while locks are
/// held and waited on: sessions move to the other servers within their
/// timeout, and no held lock is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn z01_a_server_of_three_killed_keeps_the_locks() {
    let _one_at_a_time = one_at_a_time().await;
    let servers = ZooKeeperServer::ensemble(3);
    let lead = servers
        .iter()
        .position(ZooKeeperServer::leads)
        .expect("a leader");
    let url = ZooKeeperServer::url(&servers);
    let servers = std::sync::Arc::new(std::sync::Mutex::new(servers));
    let kill = {
        let servers = std::sync::Arc::clone(&servers);
        move || servers.lock().unwrap()[lead].kill()
    };
    let (events, _) = a_server_lost_under_load(url, Duration::from_secs(4), kill).await;
    let lost: Vec<&Event> = events.iter().filter(|e| e.kind == "lost").collect();
    assert!(
        lost.is_empty(),
        "locks lost with one server of three: {lost:?}"
    );
}

/// z2. ZooKeeper: a client frozen past its session timeout: the session
/// expires, its nodes go, the next holder's token (a zxid) is higher, and
/// the thawed client is told and fenced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn z02_client_frozen_past_its_session_is_told_and_fenced() {
    let _one_at_a_time = one_at_a_time().await;
    let server = ZooKeeperServer::start();
    let ttl = Duration::from_secs(1);
    let url = ZooKeeperServer::url(std::slice::from_ref(&server));
    a_client_frozen_past_its_lease(url, ttl, 3 * ttl).await;
}
