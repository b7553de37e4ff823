//! Fenced writes to Redis.

use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::{Script, Value};

use super::stale;
use crate::error::StoreError;
use crate::error::{LockError, Operation};
use crate::token::FencingToken;

/// Checks the token against the record (`KEYS[2]`), records it, then runs
/// `ARGV[2..]` as one command. Returns `{1, reply}` or `{0, newest}`.
const FENCED_COMMAND: &str = r#"
local newest = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[1]) < newest then
  return {0, string.format('%.0f', newest)}
end
redis.call('SET', KEYS[2], ARGV[1])
local reply = redis.call(unpack(ARGV, 2))
-- A record expires with data that expires; otherwise it stays (also when
-- the command deleted the data: a stale holder must not recreate it).
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return {1, reply}
"#;

static FENCED_SCRIPT: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(FENCED_COMMAND));

/// Fenced writes to one Redis (any redis-rs async connection: a
/// `ConnectionManager`, a multiplexed or a cluster connection).
///
/// The newest token per resource is kept beside it, in the same cluster
/// slot: `{<key>}:fence` for a key without a hash tag, `<key>:fence` for one
/// with. There is one record per key, never one per write; it expires when
/// the key expires and goes with [`RedisFence::delete`]. A fenced command
/// that deletes the key keeps the record, so that a stale holder cannot
/// recreate the data.
///
/// ```no_run
/// use lock_core::fence::RedisFence;
/// use lock_core::{LockError, Locker};
///
/// # async fn run(locker: Locker, data: redis::aio::ConnectionManager) -> Result<(), LockError> {
/// let fence = RedisFence::new(data);
/// let guard = locker.lock("account:7").await?;
/// // Rejected with LockError::StaleToken if a newer holder already wrote.
/// fence.set("account:7:balance", "120", guard.token()).await?;
/// fence.hset("account:7", &[("owner", "ada"), ("state", "open")], guard.token()).await?;
/// fence.run("account:7:log", guard.token(), redis::cmd("RPUSH").arg("account:7:log").arg("paid")).await?;
/// guard.release().await
/// # }
/// ```
#[derive(Clone)]
pub struct RedisFence<C> {
    connection: C,
    timeout: Duration,
}

impl<C> std::fmt::Debug for RedisFence<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisFence")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// The record key that holds the newest token for `key`, in `key`'s slot.
pub fn record_key(key: impl AsRef<str>) -> Result<String, LockError> {
    let key = key.as_ref();
    let has_tag = key
        .find('{')
        .and_then(|open| key[open + 1..].find('}').map(|len| len > 0))
        .unwrap_or(false);
    if has_tag {
        Ok(format!("{key}:fence"))
    } else if key.contains(['{', '}']) {
        Err(LockError::InvalidKey {
            key: LockError::shown(key),
            reason: "a fenced key with `{` or `}` must contain a non-empty hash tag `{...}`, \
                     so that its token record can share its cluster slot"
                .into(),
        })
    } else if key.is_empty() {
        Err(LockError::InvalidKey {
            key: String::new(),
            reason: "the fenced key is empty".into(),
        })
    } else {
        Ok(format!("{{{key}}}:fence"))
    }
}

impl<C> RedisFence<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// Fenced writes over `connection`, each bounded by 2 s.
    pub fn new(connection: C) -> Self {
        RedisFence {
            connection,
            timeout: Duration::from_secs(2),
        }
    }

    /// Bounds each write by `timeout` instead.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// `SET key value` if `token` is not older than the newest seen for `key`.
    ///
    /// # Cancel safety
    /// A dropped call may still be applied by the server (it was sent).
    pub async fn set(
        &self,
        key: impl AsRef<str>,
        value: impl redis::ToRedisArgs,
        token: FencingToken,
    ) -> Result<(), LockError> {
        let key = key.as_ref();
        let mut cmd = redis::cmd("SET");
        cmd.arg(key).arg(value);
        self.run(key, token, &cmd).await.map(drop)
    }

    /// `HSET key field value ...` if `token` is not older than the newest
    /// seen for `key`.
    pub async fn hset<F, V>(
        &self,
        key: impl AsRef<str>,
        fields: &[(F, V)],
        token: FencingToken,
    ) -> Result<(), LockError>
    where
        F: redis::ToRedisArgs,
        V: redis::ToRedisArgs,
    {
        let key = key.as_ref();
        let mut cmd = redis::cmd("HSET");
        cmd.arg(key);
        for (field, value) in fields {
            cmd.arg(field).arg(value);
        }
        self.run(key, token, &cmd).await.map(drop)
    }

    /// Runs `command` (one write on `key`, the only key it may touch in a
    /// cluster) if `token` is not older than the newest seen for `key`, in
    /// one round trip; returns the command's reply.
    pub async fn run(
        &self,
        key: impl AsRef<str>,
        token: FencingToken,
        command: &redis::Cmd,
    ) -> Result<Value, LockError> {
        let key = key.as_ref();
        let record = record_key(key)?;
        let mut invocation = FENCED_SCRIPT.key(key);
        invocation.key(&record).arg(token.get());
        for arg in command.args_iter() {
            match arg {
                redis::Arg::Simple(bytes) => {
                    invocation.arg(bytes);
                }
                _ => {
                    return Err(LockError::invalid_config(
                        "fenced command",
                        "cursor commands cannot be fenced",
                    ));
                }
            }
        }
        let mut conn = self.connection.clone();
        let reply: Value = self
            .bounded(key, invocation.invoke_async(&mut conn))
            .await?;
        match reply {
            Value::Array(mut parts) if parts.len() == 2 => {
                let outcome = parts.remove(0);
                let payload = parts.remove(0);
                match outcome {
                    Value::Int(1) => Ok(payload),
                    _ => {
                        let newest = match payload {
                            Value::BulkString(bytes) => {
                                String::from_utf8_lossy(&bytes).parse().unwrap_or(0)
                            }
                            _ => 0,
                        };
                        Err(stale(key, token, FencingToken::new(newest)))
                    }
                }
            }
            other => Err(LockError::from_store(
                key,
                Operation::FencedWrite,
                StoreError::not_applied(format!(
                    "unexpected reply from the fenced-write script: {other:?}"
                )),
            )),
        }
    }

    /// Awaits `request` within the timeout, naming `key` in errors. A write
    /// is sent once: what it writes is the caller's, and need not be safe
    /// to repeat.
    async fn bounded<T>(
        &self,
        key: &str,
        request: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, LockError> {
        StoreError::bounded(self.timeout, true, request, |err, _| StoreError::from(err))
            .await
            .map_err(|failure| LockError::from_store(key, Operation::FencedWrite, failure))
    }

    /// Deletes `key` and its token record.
    pub async fn delete(&self, key: impl AsRef<str>) -> Result<(), LockError> {
        let key = key.as_ref();
        let record = record_key(key)?;
        let mut conn = self.connection.clone();
        let mut del = redis::cmd("DEL");
        del.arg(key).arg(&record);
        self.bounded(key, del.query_async::<i64>(&mut conn))
            .await
            .map(drop)
    }

    /// The newest token recorded for `key` (`None`: no fenced write yet).
    pub async fn newest(&self, key: impl AsRef<str>) -> Result<Option<FencingToken>, LockError> {
        let key = key.as_ref();
        let record = record_key(key)?;
        let mut conn = self.connection.clone();
        let mut get = redis::cmd("GET");
        get.arg(&record);
        let newest = self
            .bounded(key, get.query_async::<Option<u64>>(&mut conn))
            .await?;
        Ok(newest.map(FencingToken::new))
    }
}

#[cfg(test)]
mod tests {
    use super::record_key;

    #[test]
    fn records_share_the_slot_of_their_key() {
        assert_eq!(record_key("account:7").unwrap(), "{account:7}:fence");
        assert_eq!(
            record_key("{account:7}:balance").unwrap(),
            "{account:7}:balance:fence"
        );
        assert!(record_key("a}b").is_err());
        assert!(record_key("a{}b").is_err());
        assert!(record_key("").is_err());
    }
}
