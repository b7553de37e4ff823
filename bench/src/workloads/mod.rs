//! The workloads. Each returns one [`Row`](crate::stats::Row) per subject
//! and round.

pub mod board;
pub mod contention;
pub mod distinct;
pub mod http;
pub mod processes;
pub mod reference;

use crate::subject::Subject;

/// Counts the top-level Redis commands a subject sends during a workload:
/// lock-core's scripts and subscriptions (the test kit's list) and, for
/// rslock, also its `SET NX` (its unlock is a script). `INFO commandstats`
/// also counts the commands scripts call, so `SET` is counted only for the
/// subject that sends it itself.
pub struct CommandCount {
    admin: redis::aio::MultiplexedConnection,
    with_set: bool,
    before: u64,
}

impl CommandCount {
    /// Starts counting on the server of `client`; `None` off Redis.
    pub async fn start(client: &redis::Client, subject: &Subject) -> Option<CommandCount> {
        if !subject.on_redis() {
            return None;
        }
        let mut admin = client
            .get_multiplexed_async_connection()
            .await
            .expect("admin connection");
        let with_set = matches!(subject, Subject::Rslock(_));
        let before = sent(&mut admin, with_set).await;
        Some(CommandCount {
            admin,
            with_set,
            before,
        })
    }

    /// Commands per acquisition since the start.
    pub async fn per_acquisition(mut self, acquisitions: u64) -> f64 {
        let after = sent(&mut self.admin, self.with_set).await;
        (after - self.before) as f64 / acquisitions.max(1) as f64
    }
}

async fn sent(admin: &mut redis::aio::MultiplexedConnection, with_set: bool) -> u64 {
    let mut total = lock_testkit::lock_commands_sent(admin).await;
    if with_set {
        total += lock_testkit::command_calls(admin, "set").await;
    }
    total
}

/// Counts over an optional counter.
pub async fn per_acquisition(count: Option<CommandCount>, acquisitions: u64) -> Option<f64> {
    match count {
        Some(count) => Some(count.per_acquisition(acquisitions).await),
        None => None,
    }
}

/// One field of an `INFO` section of the server of `client`.
pub async fn info_field(client: &redis::Client, section: &str, field: &str) -> Option<String> {
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("admin connection");
    let info: String = redis::cmd("INFO")
        .arg(section)
        .query_async(&mut conn)
        .await
        .expect("INFO");
    let prefix = format!("{field}:");
    info.lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .map(|value| value.trim().to_owned())
}
