//! The test kit's ZooKeeper servers: a
//! standalone server serves on a free loopback port; an ensemble of 3
//! forms one quorum, elects a new leader when its leader is killed, stops
//! serving without a quorum, and leaves no process behind.

use std::time::{Duration, Instant};

use lock_testkit::{ZooKeeperServer, send_signal};

/// Waits until `check` holds (polled: ZooKeeper has no event a test can
/// follow from outside).
fn within(bound: Duration, check: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + bound;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

#[test]
fn a_standalone_server_serves_and_stops_with_its_test() {
    let server = ZooKeeperServer::start();
    assert!(
        !server.address().ends_with(":2181"),
        "the kit used ZooKeeper's standard port"
    );
    let mode = server.four_letters("srvr").expect("srvr");
    assert!(mode.contains("Mode: standalone"), "{mode}");
    let pid = server.pid().expect("running");
    drop(server);
    assert!(!send_signal(pid, 0), "ZooKeeper {pid} outlived its test");
}

#[test]
fn an_ensemble_of_three_elects_a_new_leader_and_needs_a_quorum() {
    let mut servers = ZooKeeperServer::ensemble(3);
    let leaders: Vec<usize> = (0..3).filter(|&i| servers[i].leads()).collect();
    assert_eq!(leaders.len(), 1, "one leader of three");
    let old = leaders[0];
    servers[old].kill();
    let others: Vec<usize> = (0..3).filter(|&i| i != old).collect();
    assert!(
        within(Duration::from_secs(30), || others
            .iter()
            .any(|&i| servers[i].leads())),
        "the two left elected no leader"
    );
    // With a second server gone, the last one has no quorum and stops
    // serving: the three are one ensemble, not three alone.
    servers[others[0]].kill();
    let last = others[1];
    assert!(
        within(Duration::from_secs(30), || !servers[last].serving()),
        "a server alone kept serving"
    );
    servers[old].restart();
    assert!(
        within(Duration::from_secs(30), || servers[last].serving()),
        "the quorum did not come back"
    );
    let pids: Vec<u32> = servers.iter().filter_map(ZooKeeperServer::pid).collect();
    assert_eq!(pids.len(), 2);
    drop(servers);
    for pid in pids {
        assert!(!send_signal(pid, 0), "ZooKeeper {pid} outlived its test");
    }
}
