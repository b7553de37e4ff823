//! PostgreSQL's scenarios, through the same two drivers as the consensus
//! stores' (a store lost under load, a client frozen past its lease): lock
//! clients are OS processes on a `postgres://` URL, fenced writes go to a
//! Redis data server, and the history checker judges both.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_testkit::{PgBouncer, PostgresServer};

use crate::consensus::{a_client_frozen_past_its_lease, a_server_lost_under_load};
use crate::harness::one_at_a_time;

/// The lease of these scenarios: long enough that a restart (about a
/// second) fits inside it.
const TTL: Duration = Duration::from_secs(2);

/// p1. The server restarted (fast shutdown, start) while locks are held
/// and waited on: the Lockers connect again, the leases are rows that
/// outlive the restart, no two holders pass the fence together, and
/// tokens keep rising.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p01_server_restarted_while_held_and_waited() {
    let _one_at_a_time = one_at_a_time().await;
    let server = Arc::new(PostgresServer::start());
    let url = server.postgres_url();
    // The closure is dropped once run: the server must outlive it.
    let restart = {
        let server = Arc::clone(&server);
        move || server.restart()
    };
    a_server_lost_under_load(url, TTL, restart).await;
}

/// p2. Every connection of the lock clients ended by the server
/// (`pg_terminate_backend`) under load: the pools and the `LISTEN`
/// connections are made again, and the history holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p02_connections_terminated_under_load() {
    let _one_at_a_time = one_at_a_time().await;
    let server = Arc::new(PostgresServer::start());
    let url = server.postgres_url();
    let terminate = {
        let server = Arc::clone(&server);
        move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async {
                let admin = server.client().await;
                let ended = "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                         WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'";
                let ended: i64 = admin.query_one(ended, &[]).await.expect("terminate").get(0);
                assert!(ended >= 4, "only {ended} connections to end");
            });
        }
    };
    a_server_lost_under_load(url, TTL, terminate).await;
}

/// p3. A client frozen (SIGSTOP) past its lease: another client takes the
/// row over with a higher token, and the thawed client is told and fenced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p03_client_frozen_past_its_lease_is_told_and_fenced() {
    let _one_at_a_time = one_at_a_time().await;
    let server = PostgresServer::start();
    let ttl = Duration::from_secs(1);
    a_client_frozen_past_its_lease(server.postgres_url(), ttl, 3 * ttl).await;
}

/// p4. The PgBouncer in front of the server killed and started again
/// under load: every pooled connection breaks, the Lockers connect
/// through it again, and the history holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p04_pgbouncer_restarted_under_load() {
    let _one_at_a_time = one_at_a_time().await;
    let bouncer = PgBouncer::start();
    let url = bouncer.listening_url();
    let bouncer = Arc::new(Mutex::new(bouncer));
    let restart = {
        let bouncer = Arc::clone(&bouncer);
        move || bouncer.lock().unwrap().restart()
    };
    a_server_lost_under_load(url, TTL, restart).await;
}
