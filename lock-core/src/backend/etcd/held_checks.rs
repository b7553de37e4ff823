//! etcd's side of the held entries: deleting one if it is still the same,
//! and checking many for renewals in one read.

use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, GetOptions, Txn, TxnOp, TxnOpResponse};

use super::errors::bounded;
use crate::backend::queued::BatchWork;
use crate::error::StoreError;

/// Deletes the entry `stored` if it is still the one of `revision`;
/// whether it was.
pub(super) async fn delete_entry(
    client: &Client,
    timeout: Duration,
    stored: &str,
    revision: i64,
) -> Result<bool, StoreError> {
    let same = Compare::create_revision(stored, CompareOp::Equal, revision);
    delete_when(client, timeout, stored, same).await
}

/// Deletes `stored` if `when` holds; whether it did.
pub(super) async fn delete_when(
    client: &Client,
    timeout: Duration,
    stored: &str,
    when: Compare,
) -> Result<bool, StoreError> {
    let txn = Txn::new()
        .when([when])
        .and_then([TxnOp::delete(stored, None)]);
    let reply = bounded(timeout, true, client.clone().txn(txn)).await?;
    Ok(reply.succeeded())
}

/// Whether held entries still stand, for renewals: one read for every
/// renewal due at once (at most etcd's default of 128 operations per
/// transaction).
pub(super) struct HeldCheck {
    pub(super) client: Client,
    pub(super) timeout: Duration,
}

/// Most operations etcd takes in one transaction by default.
pub(super) const MAX_TXN_OPS: usize = 128;

impl BatchWork for HeldCheck {
    /// An entry's key and create revision.
    type Ask = (String, i64);
    type Answer = Result<bool, StoreError>;

    async fn run(&mut self, asks: Vec<(String, i64)>) -> Vec<Self::Answer> {
        let gets = asks.iter().map(|(stored, _)| {
            TxnOp::get(stored.as_str(), Some(GetOptions::new().with_keys_only()))
        });
        let txn = Txn::new().and_then(gets.collect::<Vec<_>>());
        match bounded(self.timeout, false, self.client.txn(txn)).await {
            Ok(reply) => reply
                .op_responses()
                .into_iter()
                .zip(&asks)
                .map(|(answer, (_, revision))| {
                    Ok(matches!(answer, TxnOpResponse::Get(got)
                        if got.kvs().first().is_some_and(|kv| kv.create_revision() == *revision)))
                })
                .collect(),
            Err(err) => asks.iter().map(|_| Err(err.clone())).collect(),
        }
    }
}
