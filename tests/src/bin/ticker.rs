//! A replica's timer for a scheduled job, in its own OS process, for the
//! tests of jobs run once across processes: `ticker <lock-url> <key>
//! <start-unix-ms> <period-ms> <offset-ms> <ticks> <hold-ms> [<ca-file>]`
//! fires at `start + i * period + offset` for `i` in `0..ticks`, takes
//! `key` with `if_held_skip` and `hold_at_least(hold)`, and prints `ran
//! <i> <token>` or `skipped <i>`; then waits until the key is free, so
//! that it exits with nothing of its own in the store. A `rediss://` store
//! is trusted through the certificate authority in `ca-file`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lock_core::Locker;
use tokio::time::Instant;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (url, key, numbers, ca) = match args.as_slice() {
        [_, url, key, numbers @ ..] if numbers.len() == 5 => (url, key, numbers, None),
        [_, url, key, numbers @ .., ca] if numbers.len() == 5 => (url, key, numbers, Some(ca)),
        _ => {
            eprintln!(
                "usage: ticker <lock-url> <key> <start-unix-ms> <period-ms> <offset-ms> <ticks> <hold-ms> [<ca-file>]"
            );
            std::process::exit(2);
        }
    };
    let [start, period, offset, ticks, hold] =
        [0, 1, 2, 3, 4].map(|i| numbers[i].parse::<u64>().expect("a number"));
    let mut builder = Locker::builder();
    if let Some(ca) = ca {
        builder = builder.tls_root_certificates(std::fs::read(ca).expect("ca-file"));
    }
    let locker = builder.connect(url).await.expect("connect");
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64;
    // A ticker that starts after its first tick would shift its whole
    // schedule: it fails instead.
    let Some(ahead) = (start + offset).checked_sub(now_ms) else {
        eprintln!(
            "started {} ms after the first tick",
            now_ms - start - offset
        );
        std::process::exit(3);
    };
    let first = Instant::now() + Duration::from_millis(ahead);
    for i in 0..ticks {
        tokio::time::sleep_until(first + Duration::from_millis(i * period)).await;
        let run = locker
            .lock(key)
            .ttl(Duration::from_millis(hold * 4))
            .hold_at_least(Duration::from_millis(hold))
            .if_held_skip()
            .await
            .expect("the store answers");
        match run {
            Some(job) => {
                println!("ran {i} {}", job.token());
                job.release().await.expect("release");
            }
            None => println!("skipped {i}"),
        }
    }
    // The last job's lease is kept past its release: once it is given
    // back (a release, heard), the store holds nothing of this job.
    let free = locker.lock(key).wait(Duration::from_millis(hold * 8)).await;
    free.expect("the last job's lease is given back")
        .release()
        .await
        .expect("release");
}
