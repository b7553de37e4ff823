//! What replica acknowledgement costs: U16 (16 tasks taking and releasing
//! locks on distinct keys through one Locker) on a master with one live
//! replica, without and with `replicas(1, 1 s)`, in one run. Each
//! confirmed acquisition renews its lease and sends `WAIT` on a connection
//! of its own.
//!
//! `cargo run --release -p lock-bench --example replica_confirmation`

use std::time::Duration;

use lock_core::Locker;

#[path = "shared/u16.rs"]
mod u16;
use lock_testkit::RedisServer;
use u16::u16;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let master = RedisServer::start();
    let _replica = master.start_replica().await;
    let plain = Locker::redis(&master.url()).await.expect("connect");
    let confirmed = Locker::builder()
        .replicas(1, Duration::from_secs(1))
        .redis(&master.url())
        .await
        .expect("connect");
    println!("| U16, master + 1 replica | acquisitions/s | × without |");
    println!("|---|---|---|");
    for round in 0..2 {
        let (_, without) = u16(&plain, &format!("plain{round}")).await;
        let (_, with) = u16(&confirmed, &format!("acked{round}")).await;
        println!("| without replicas() | {without:.0} | 1.00 |");
        println!("| replicas(1, 1 s) | {with:.0} | {:.2} |", with / without);
    }
}
