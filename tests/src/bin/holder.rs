//! A lock holder in its own OS process, for tests that kill or pause a
//! holder: `holder <redis-url> <key> <ttl-ms>` takes the lock, prints
//! `token=<n>`, and keeps it (renewing) until killed.

use std::time::Duration;

use lock_core::Locker;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, key, ttl] = args.as_slice() else {
        eprintln!("usage: holder <redis-url> <key> <ttl-ms>");
        std::process::exit(2);
    };
    let ttl = Duration::from_millis(ttl.parse().expect("ttl"));
    let locker = Locker::redis(url).await.expect("connect");
    let guard = locker.lock(key.as_str()).ttl(ttl).await.expect("acquire");
    println!("token={}", guard.token());
    let lost = guard.lost().await;
    println!("lost: {lost}");
}
