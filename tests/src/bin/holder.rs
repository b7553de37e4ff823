//! A lock holder in its own OS process, for tests that kill or pause a
//! holder: `holder <redis-url> <key> <ttl-ms> [permits]` takes the lock (or
//! one of a semaphore's `permits`), prints `token=<n>`, and keeps it
//! (renewing) until killed.

use std::time::Duration;

use lock_core::Locker;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (url, key, ttl, permits) = match args.as_slice() {
        [_, url, key, ttl] => (url, key, ttl, None),
        [_, url, key, ttl, permits] => (url, key, ttl, Some(permits.parse().expect("permits"))),
        _ => {
            eprintln!("usage: holder <redis-url> <key> <ttl-ms> [permits]");
            std::process::exit(2);
        }
    };
    let ttl = Duration::from_millis(ttl.parse().expect("ttl"));
    let locker = Locker::redis(url).await.expect("connect");
    let request = match permits {
        Some(permits) => locker.semaphore(key, permits),
        None => locker.lock(key),
    };
    let guard = request.ttl(ttl).await.expect("acquire");
    println!("token={}", guard.token());
    let lost = guard.lost().await;
    println!("lost: {lost}");
}
