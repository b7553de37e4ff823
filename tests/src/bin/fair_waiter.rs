//! Fair-lock waiters in their own OS process, for the tests of fairness
//! between processes: `fair_waiter <redis-url> <key> <name> <tasks>
//! <ttl-ms>` lines `tasks` tasks up for the fair lock on `key`, one after
//! another (each once the one before has asked the store), prints
//! `lined up` once all are, then, as each is granted, appends `<name><i>`
//! to the list `order` and releases. It exits once all were served.

use std::time::Duration;

use lock_core::Locker;
use redis::AsyncCommands;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, key, name, tasks, ttl] = args.as_slice() else {
        eprintln!("usage: fair_waiter <redis-url> <key> <name> <tasks> <ttl-ms>");
        std::process::exit(2);
    };
    let tasks: usize = tasks.parse().expect("tasks");
    let ttl = Duration::from_millis(ttl.parse().expect("ttl"));
    let locker = Locker::redis(url).await.expect("connect");
    let data = redis::Client::open(url.as_str())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("data connection");
    let mut handles = Vec::new();
    for i in 1..=tasks {
        let (mine, mut data) = (locker.clone(), data.clone());
        let (key_of_task, served) = (key.clone(), format!("{name}{i}"));
        handles.push(tokio::spawn(async move {
            let request = mine
                .fair_lock(key_of_task)
                .ttl(ttl)
                .wait(Duration::from_secs(60));
            let guard = request.await.expect("acquire");
            let _: i64 = data.rpush("order", served).await.expect("RPUSH");
            guard.release().await.expect("release");
        }));
        // A request is counted once it has its turn to send, so the next
        // one, started after that, sends after it.
        let in_line = || match i {
            1 => locker.local_lines() == 1,
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
