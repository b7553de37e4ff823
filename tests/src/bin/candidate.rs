//! An election's candidate in its own OS process, for the tests of
//! leaders across processes: `candidate <lock-url> <key> <name> <ttl-ms>
//! <fence-redis-url> [<ca-file>]` prints `campaigning`, then campaigns for
//! `key` with `name` as its published value. While it leads it appends its
//! token to the list `relay:history` through a fence every 20 ms, printing
//! `leading <token>` once and `refused <token>` for each write the fence
//! refuses; on losing it prints `lost <token>`, writes once more (as a
//! leader that has not heard yet would) and campaigns again. A line
//! `resign` on stdin resigns (`resigned <token>`) and exits. A `rediss://`
//! store is trusted through the certificate authority in `ca-file`.
//!
//! It writes without asking whether it still leads, as a leader that was
//! paused would: the fence, not the lease, must refuse it.

use std::time::Duration;

use lock_core::Locker;
use lock_core::fence::RedisFence;
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (url, key, name, ttl, fence_url, ca) = match args.as_slice() {
        [_, url, key, name, ttl, fence] => (url, key, name, ttl, fence, None),
        [_, url, key, name, ttl, fence, ca] => (url, key, name, ttl, fence, Some(ca)),
        _ => {
            eprintln!(
                "usage: candidate <lock-url> <key> <name> <ttl-ms> <fence-redis-url> [<ca-file>]"
            );
            std::process::exit(2);
        }
    };
    let ttl = Duration::from_millis(ttl.parse().expect("ttl"));
    let mut builder = Locker::builder();
    if let Some(ca) = ca {
        builder = builder.tls_root_certificates(std::fs::read(ca).expect("ca-file"));
    }
    let locker = builder.connect(url).await.expect("connect");
    let data = redis::Client::open(fence_url.as_str())
        .expect("fence url")
        .get_multiplexed_async_connection()
        .await
        .expect("fence store");
    let fence = RedisFence::new(data);
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    println!("campaigning");
    loop {
        let leadership = locker
            .election(key)
            .value(name.as_str())
            .ttl(ttl)
            .await
            .expect("campaign");
        let token = leadership.token();
        println!("leading {token}");
        let mut append = redis::cmd("RPUSH");
        append.arg("relay:history").arg(token.get());
        loop {
            tokio::select! {
                biased;
                () = tokio::time::sleep(Duration::from_millis(20)) => {
                    if fence.run("relay:history", token, &append).await.is_err() {
                        println!("refused {token}");
                    }
                }
                err = leadership.lost() => {
                    let _ = err;
                    println!("lost {token}");
                    // Once more, as a leader that has not heard yet would.
                    if fence.run("relay:history", token, &append).await.is_err() {
                        println!("refused {token}");
                    }
                    break;
                }
                line = stdin.next_line() => {
                    if let Ok(Some(line)) = &line && line != "resign" {
                        continue;
                    }
                    leadership.resign().await.expect("resign");
                    println!("resigned {token}");
                    return;
                }
            }
        }
    }
}
