//! RedLock's second phase on one server: the lease names the token the
//! quorum agreed on.

use redis::aio::ConnectionLike;

use super::RedisBackend;
use super::keys::fence;
use super::replies::other_format;
use super::scripts::RAISE_SCRIPT;
use crate::backend::stored_keys::StoredKeys;
use crate::error::StoreError;
use crate::token::FencingToken;

impl<C> RedisBackend<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// Makes `owner`'s lease of `keys` name `token` (above the one this
    /// server minted), and every later token of the key on this server
    /// pass it. `false` if `owner` no longer holds the lease.
    pub(crate) async fn raise_token(
        &self,
        keys: &StoredKeys,
        owner: &str,
        token: FencingToken,
    ) -> Result<bool, StoreError> {
        let mut call = RAISE_SCRIPT.key(keys.lease());
        call.key(fence(keys)).arg(owner).arg(token.get());
        let reply: redis::Value = self.script(&call).await?.reply;
        if let Some(err) = other_format(&reply) {
            return Err(err);
        }
        let raised: i64 = redis::from_redis_value(reply).map_err(StoreError::in_doubt)?;
        Ok(raised == 1)
    }
}
