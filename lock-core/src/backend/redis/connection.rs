//! Where the backend's requests go: [`RedisConnection`] for commands and
//! scripts, [`Endpoint`] for the connections of their own that pub/sub and
//! `WAIT` open.

use std::sync::Arc;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use super::sentinel::{SentinelConnection, SentinelMaster};
use crate::error::StoreError;

/// The command connection of a backend made by
/// [`RedisBackend::connect`](super::RedisBackend::connect): to one server
/// (reconnecting on its own), to whichever server the sentinels name
/// master, or to a Redis Cluster (each request to the master of its key's
/// slot, `MOVED` and `ASK` followed).
#[derive(Clone)]
pub struct RedisConnection(Route);

impl std::fmt::Debug for RedisConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConnection").finish_non_exhaustive()
    }
}

#[derive(Clone)]
enum Route {
    Server(ConnectionManager),
    Sentinel(SentinelConnection),
    Cluster(ClusterConnection),
}

impl RedisConnection {
    pub(super) fn server(connection: ConnectionManager) -> Self {
        RedisConnection(Route::Server(connection))
    }

    pub(super) fn sentinel(master: Arc<SentinelMaster>) -> Self {
        RedisConnection(Route::Sentinel(SentinelConnection::new(master)))
    }

    pub(super) fn cluster(connection: ClusterConnection) -> Self {
        RedisConnection(Route::Cluster(connection))
    }
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &mut self.0 {
            Route::Server(connection) => connection.req_packed_command(cmd),
            Route::Sentinel(connection) => connection.req_packed_command(cmd),
            Route::Cluster(connection) => connection.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match &mut self.0 {
            Route::Server(c) => c.req_packed_commands(pipeline, offset, count),
            Route::Sentinel(c) => c.req_packed_commands(pipeline, offset, count),
            Route::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.0 {
            Route::Server(connection) => connection.get_db(),
            Route::Sentinel(connection) => connection.get_db(),
            Route::Cluster(connection) => connection.get_db(),
        }
    }
}

/// The server that connections of their own (pub/sub, `WAIT`) go to,
/// outside a cluster.
#[derive(Clone)]
pub(super) enum Endpoint {
    Server(Box<redis::Client>),
    Sentinel(Arc<SentinelMaster>),
}

impl Endpoint {
    /// A client for the server, with the generation of the master it
    /// reaches (always 0 for one server): a connection made from an older
    /// generation goes to a server that may no longer be the master.
    pub(super) async fn client(&self) -> Result<(redis::Client, u64), StoreError> {
        match self {
            Endpoint::Server(client) => Ok((redis::Client::clone(client), 0)),
            Endpoint::Sentinel(master) => {
                let current = master.current().await?;
                Ok((current.client, current.generation))
            }
        }
    }

    /// Whether a connection made at `generation` still goes to the master.
    pub(super) fn is_current(&self, generation: u64) -> bool {
        match self {
            Endpoint::Server(_) => true,
            Endpoint::Sentinel(master) => master.generation() == generation,
        }
    }

    /// For a sentinel-managed endpoint: a signal that changes whenever the
    /// master may have moved.
    pub(super) fn moves(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        match self {
            Endpoint::Server(_) => None,
            Endpoint::Sentinel(master) => Some(master.forgotten()),
        }
    }

    /// Tells the endpoint that connecting to the master of `generation`
    /// failed with `err`: the sentinels are asked again if it is gone.
    pub(super) fn failed(&self, generation: u64, err: &redis::RedisError) {
        match self {
            Endpoint::Sentinel(master) => master.failed(generation, err),
            Endpoint::Server(_) => {}
        }
    }
}
