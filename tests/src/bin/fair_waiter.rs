//! Fair-lock waiters in their own OS process, for the tests of fairness
//! between processes: `fair_waiter <lock-url> <key> <name> <tasks> <ttl-ms>
//! [<ca-file>]` lines `tasks` tasks up for the fair lock on `key`, one
//! after another (each once the one before has its turn to send), prints
//! `lined up` once all are, then, as each is granted, prints `<name><i>
//! <token>` and releases. It exits once all were served. A `rediss://`
//! store is trusted through the certificate authority in `ca-file`.

use std::time::Duration;

use lock_core::Locker;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (url, key, name, tasks, ttl, ca) = match args.as_slice() {
        [_, url, key, name, tasks, ttl] => (url, key, name, tasks, ttl, None),
        [_, url, key, name, tasks, ttl, ca] => (url, key, name, tasks, ttl, Some(ca)),
        _ => {
            eprintln!("usage: fair_waiter <lock-url> <key> <name> <tasks> <ttl-ms> [<ca-file>]");
            std::process::exit(2);
        }
    };
    let tasks: usize = tasks.parse().expect("tasks");
    let ttl = Duration::from_millis(ttl.parse().expect("ttl"));
    let mut builder = Locker::builder();
    if let Some(ca) = ca {
        builder = builder.tls_root_certificates(std::fs::read(ca).expect("ca-file"));
    }
    let locker = builder.connect(url).await.expect("connect");
    let mut handles = Vec::new();
    for i in 1..=tasks {
        let mine = locker.clone();
        let (key_of_task, served) = (key.clone(), format!("{name}{i}"));
        handles.push(tokio::spawn(async move {
            let request = mine
                .fair_lock(key_of_task)
                .ttl(ttl)
                .wait(Duration::from_secs(60));
            let guard = request.await.expect("acquire");
            println!("{served} {}", guard.token());
            guard.release().await.expect("release");
        }));
        // A request is counted once it has its turn to send, so the next
        // one, started after that, sends after it.
        let in_line = || match i {
            1 => locker.local_queues() == 1,
            _ => locker.local_waiters(key.as_str()) == i - 1,
        };
        while !in_line() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    println!("lined up");
    for handle in handles {
        handle.await.expect("task");
    }
}
