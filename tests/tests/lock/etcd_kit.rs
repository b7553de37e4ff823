//! The test kit's etcd members (for the etcd store's tests): a cluster
//! of 3 forms on free loopback ports as one cluster (a quorum of two),
//! keeps serving with one member lost, takes members back, and leaves no
//! process behind.

use std::time::{Duration, Instant};

use lock_testkit::{EtcdServer, send_signal};

/// Waits until `member` says the cluster is healthy (polled: etcd has no
/// event a test can follow).
fn healthy_within(member: &EtcdServer, bound: Duration) -> bool {
    let deadline = Instant::now() + bound;
    while Instant::now() < deadline {
        if member.healthy() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn an_etcd_cluster_of_three_survives_a_lost_member_and_stops_with_its_test() {
    let mut members = EtcdServer::cluster(3);
    let ports: Vec<u16> = members.iter().map(EtcdServer::port).collect();
    assert_eq!(ports.len(), 3);
    assert!(!ports.contains(&2379), "the kit used etcd's standard port");
    members[0].kill();
    assert!(!members[0].healthy(), "a killed member still answers");
    for member in &members[1..] {
        assert!(
            healthy_within(member, Duration::from_secs(15)),
            "two of three members lost their quorum"
        );
    }
    members[0].restart();
    assert!(members[0].healthy());
    // One cluster, not three alone: with two members gone the last one
    // has no quorum.
    members[0].kill();
    members[1].kill();
    let deadline = Instant::now() + Duration::from_secs(15);
    while members[2].healthy() {
        assert!(
            Instant::now() < deadline,
            "a member alone kept a quorum: the members are not one cluster"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Back with one member: two of three again.
    members[0].restart();
    assert!(
        healthy_within(&members[2], Duration::from_secs(15)),
        "the quorum did not come back"
    );
    members[1].restart();
    let pids: Vec<u32> = members.iter().filter_map(EtcdServer::pid).collect();
    assert_eq!(pids.len(), 3);
    drop(members);
    for pid in pids {
        assert!(!send_signal(pid, 0), "etcd {pid} outlived its test");
    }
}
