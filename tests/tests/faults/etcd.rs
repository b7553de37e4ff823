//! The etcd scenarios: a leader lost under load, and a client frozen past
//! its lease. Lock clients are OS processes on an `etcd://` URL; fenced
//! writes go to a Redis data server, and the history checker judges both.

use std::time::Duration;

use lock_testkit::history::now_ms;
use lock_testkit::{EtcdServer, RedisServer};

use crate::harness::{Clients, Workers, assert_history, facts, one_at_a_time, store_histories};
use crate::scenarios::blocking;

/// The `etcd://` URL of `members`.
fn url(members: &[EtcdServer]) -> String {
    let hosts: Vec<String> = members
        .iter()
        .map(|m| format!("127.0.0.1:{}", m.port()))
        .collect();
    format!("etcd://{}", hosts.join(","))
}

/// Which of `members` leads (asked of each member itself).
async fn leader(members: &[EtcdServer]) -> usize {
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

/// e1. The leader of 3 killed while locks are held and waited on: the
/// other two elect a new one, the clients go on through it, no two holders
/// ever pass the fence together, and tokens keep rising.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e01_leader_of_three_killed_while_held_and_waited() {
    let _one_at_a_time = one_at_a_time().await;
    let members = EtcdServer::cluster(3);
    let data = RedisServer::start();
    let ttl = Duration::from_secs(2);
    let mut clients = Clients::new();
    let shape = Workers {
        count: 4,
        keys: 2,
        ops: 60,
        ttl,
        work: Duration::from_millis(10),
    };
    clients.spawn_workers(&url(&members), &data, shape);
    let lead = leader(&members).await;
    let (events, pauses, killed_at, _members) = blocking(move || {
        let mut members = members;
        // Four clients on two keys: two hold while two wait.
        for _ in 0..20 {
            clients.wait_for(|e| e.kind == "acquire_ok");
        }
        let killed_at = now_ms();
        members[lead].kill();
        let (events, pauses) = clients.finish();
        (events, pauses, killed_at, members)
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
    assert!(after >= 100, "{after} acquisitions after the leader died");
    assert!(summary.acquired >= 200, "{summary:?}");
}

/// e2. A client frozen (SIGSTOP) inside its critical section past its
/// lease: etcd revokes the lease, another client takes the lock with a
/// higher revision, and the thawed client is told it lost the lease; its
/// writes are rejected by the fence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e02_client_frozen_past_its_lease_is_told_and_fenced() {
    let _one_at_a_time = one_at_a_time().await;
    let member = EtcdServer::start();
    let data = RedisServer::start();
    let ttl = Duration::from_secs(1);
    let mut clients = Clients::new();
    let shape = Workers {
        count: 3,
        keys: 1,
        ops: 15,
        ttl,
        work: Duration::from_millis(100),
    };
    clients.spawn_workers(&url(std::slice::from_ref(&member)), &data, shape);
    let (events, pauses, held) = blocking(move || {
        // A fresh acquisition: its holder is inside its 100 ms of work.
        let held = clients.wait_for(|e| e.kind == "acquire_ok" && e.at + 40 >= now_ms());
        // etcd revokes an expired lease within half a second of its ttl.
        clients.freeze(&held.client, 3 * ttl);
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
