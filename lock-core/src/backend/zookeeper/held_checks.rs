//! Checking many held nodes for renewals in one read of their session: a
//! node that still stands in a session that answered lives at least the
//! session timeout from when the read was sent. A `sync` goes first: a
//! server cut off from its leader answers reads from its own copy, and may
//! find a node the leader has already deleted with an expired session.

use std::time::Duration;

use zookeeper_client::{Client, Error, MultiReadResult};

use super::errors::bounded;
use crate::backend::queued::BatchWork;
use crate::error::StoreError;

/// One read of many nodes of one session.
pub(super) struct HeldCheck {
    pub(super) client: Client,
    pub(super) timeout: Duration,
}

/// Most nodes read at once.
pub(super) const MAX_READS: usize = 128;

impl BatchWork for HeldCheck {
    /// A node's path and czxid.
    type Ask = (String, i64);
    type Answer = Result<bool, StoreError>;

    async fn run(&mut self, asks: Vec<(String, i64)>) -> Vec<Self::Answer> {
        if let Err(err) = bounded(self.timeout, false, self.client.sync("/")).await {
            return asks.iter().map(|_| Err(err.clone())).collect();
        }
        let mut reader = self.client.new_multi_reader();
        for (path, _) in &asks {
            if let Err(err) = reader.add_get_data(path) {
                let err = super::errors::store_error(err, false);
                return asks.iter().map(|_| Err(err.clone())).collect();
            }
        }
        match bounded(self.timeout, false, reader.commit()).await {
            Ok(results) => results
                .into_iter()
                .zip(&asks)
                .map(|(result, (_, czxid))| match result {
                    MultiReadResult::Data { stat, .. } => Ok(stat.czxid == *czxid),
                    MultiReadResult::Error { err: Error::NoNode } => Ok(false),
                    MultiReadResult::Error { err } => Err(super::errors::store_error(err, false)),
                    _ => Ok(false),
                })
                .collect(),
            Err(err) => asks.iter().map(|_| Err(err.clone())).collect(),
        }
    }
}
