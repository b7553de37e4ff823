//! MySQL's scenarios (on MariaDB), through the same two drivers as the
//! consensus stores' and PostgreSQL's (a store lost under load, a client
//! frozen past its lease): lock clients are OS processes on a `mysql://`
//! URL, fenced writes go to a Redis data server, and the history checker
//! judges both.

use std::sync::Arc;
use std::time::Duration;

use lock_testkit::{MYSQL_DATABASE, MysqlServer};

use crate::consensus::{a_client_frozen_past_its_lease, a_server_lost_under_load};
use crate::harness::one_at_a_time;

/// The lease of these scenarios: long enough that a restart fits inside it.
const TTL: Duration = Duration::from_secs(2);

/// m1. The server restarted (a clean shutdown, then a start) while locks
/// are held and waited on: the Lockers connect again (their wake-up
/// connections too), the leases are rows that outlive the restart, no two
/// holders pass the fence together, and tokens keep rising.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m01_server_restarted_while_held_and_waited() {
    let _one_at_a_time = one_at_a_time().await;
    let server = Arc::new(MysqlServer::start());
    let url = server.mysql_url();
    // The closure is dropped once run: the server must outlive it.
    let restart = {
        let server = Arc::clone(&server);
        move || server.restart()
    };
    a_server_lost_under_load(url, TTL, restart).await;
}

/// m2. Every connection of the lock clients ended by the server (`KILL`)
/// under load: the pools and the wake-up connections are made again, and
/// the history holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m02_connections_killed_under_load() {
    let _one_at_a_time = one_at_a_time().await;
    let server = Arc::new(MysqlServer::start());
    let url = server.mysql_url();
    let kill = {
        let server = Arc::clone(&server);
        move || {
            let ids = server
                .sql_as_root(&format!(
                    "SELECT id FROM information_schema.PROCESSLIST \
                     WHERE db = '{MYSQL_DATABASE}' AND id <> CONNECTION_ID()"
                ))
                .expect("the process list");
            let kills: Vec<String> = ids.lines().map(|id| format!("KILL {id};")).collect();
            // 4 clients, each with its pool and two wake-up connections.
            assert!(kills.len() >= 8, "only {} connections to end", kills.len());
            // A connection that ended meanwhile is no failure.
            let _ = server.sql_as_root(&kills.concat());
        }
    };
    a_server_lost_under_load(url, TTL, kill).await;
}

/// m3. A client frozen (SIGSTOP) past its lease: another client takes the
/// row over with a higher token, and the thawed client is told and fenced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m03_client_frozen_past_its_lease_is_told_and_fenced() {
    let _one_at_a_time = one_at_a_time().await;
    let server = MysqlServer::start();
    let ttl = Duration::from_secs(1);
    a_client_frozen_past_its_lease(server.mysql_url(), ttl, 3 * ttl).await;
}
