//! The test kit: real `redis-server` processes on free loopback ports.
//!
//! Each [`RedisServer`] runs in its own temp dir on a port picked from the
//! kernel's free ones (never 6379, never a server that is already running),
//! without persistence, and is killed when dropped - also when the test
//! panics. It can be paused (SIGSTOP), resumed, killed, restarted on the
//! same port, and given replicas.
//!
//! If `redis-server` is missing, starting one panics with the command that
//! installs it. The kit also starts Redis Sentinel and Cluster deployments,
//! PostgreSQL (also behind a [`PgBouncer`]), MariaDB ([`MysqlServer`]), etcd members ([`EtcdServer`]) and ZooKeeper servers
//! ([`ZooKeeperServer`]) the same way.

pub mod campaign_history;
mod clock_shift;
mod cluster;
mod etcd;
pub mod history;
mod mysql;
pub mod nemesis;
mod pgbouncer;
mod ports;
mod postgres;
mod process;
mod proxy;
mod scratch;
mod sentinel;
mod server;
#[cfg(feature = "stores")]
mod store;
mod zookeeper;

pub use clock_shift::ClockShift;
pub use cluster::ClusterSet;
pub use etcd::EtcdServer;
pub use mysql::{MYSQL_DATABASE, MysqlServer};
pub use pgbouncer::PgBouncer;
use ports::{free_port, free_ports};
pub use postgres::PostgresServer;
pub use process::Process;
pub use proxy::DelayProxy;
use scratch::scratch_dir;
pub use sentinel::{MASTER_NAME, SentinelSet};
pub use server::{
    LOCK_CLIENT_COMMANDS, RedisServer, ServerOptions, all_keys, assert_nothing_left, command_calls,
    lasting_keys, lock_commands_sent, send_signal, unread_bytes,
};
#[cfg(feature = "stores")]
pub use store::{
    Counting, TestStore, assert_lost, error_chain, etcd_client, etcd_keys, mysql_live_leases,
    postgres_live_leases, release_channel, token_record, zookeeper_client,
};
pub use zookeeper::{QuorumLinks, ZooKeeperServer};
