//! Asking the sentinels which server is the master.
//!
//! Every sentinel is asked at once, and the answer of the highest
//! configuration epoch wins: right after a failover a sentinel that has
//! not heard of it yet still names the former master, which goes on
//! calling itself master until it is demoted (seconds later). At one epoch
//! an answer wins over that of a sentinel still in the failover (the
//! leader names the former master until it has reconfigured the replicas,
//! while the others already name the new one). The server named is then
//! asked `ROLE` before it is used.

use futures_util::future::join_all;
use redis::aio::MultiplexedConnection;
use redis::{ConnectionAddr, IntoConnectionInfo, RedisError, RedisResult};

use super::SentinelMaster;

/// What one sentinel says of the master.
struct Named {
    /// The configuration epoch, and whether this sentinel is done with any
    /// failover of it: the higher the more recent.
    rank: (u64, bool),
    ip: String,
    port: u16,
}

impl SentinelMaster {
    /// A client for the master and a connection to it, once it says it is
    /// the master.
    pub(super) async fn ask(&self) -> RedisResult<(redis::Client, MultiplexedConnection)> {
        let (ip, port) = self.named().await?;
        let info = ConnectionAddr::Tcp(ip, port)
            .into_connection_info()?
            .set_redis_settings(self.login.clone());
        let client = redis::Client::open(info)?;
        // No response bound here: each request has its own.
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
        let mut connection = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut connection).await?;
        match role.first() {
            Some(redis::Value::BulkString(role)) if role == b"master" => Ok((client, connection)),
            _ => Err(gone(format!(
                "the sentinels name {} master of {}, and it is not (yet)",
                client.get_connection_info().addr(),
                self.name
            ))),
        }
    }

    /// The address (ip, port) of the master the newest answer names.
    pub(super) async fn named(&self) -> RedisResult<(String, u16)> {
        let answers = join_all(self.sentinels.iter().map(|s| named_by(s, &self.name))).await;
        let mut newest: Option<Named> = None;
        let mut failure = None;
        for answer in answers {
            match answer {
                Ok(Some(named)) if newest.as_ref().is_none_or(|n| named.rank > n.rank) => {
                    newest = Some(named);
                }
                Ok(_) => {}
                Err(err) => failure = Some(err),
            }
        }
        let Some(named) = newest else {
            return Err(failure.unwrap_or_else(|| {
                let kind = redis::ErrorKind::MasterNameNotFoundBySentinel;
                RedisError::from((kind, "no sentinel knows the master's name"))
            }));
        };
        Ok((named.ip, named.port))
    }
}

/// What the sentinel behind `sentinel` says of the master `name`: `None`
/// if it does not know the name.
async fn named_by(sentinel: &redis::Client, name: &str) -> RedisResult<Option<Named>> {
    let mut connection = sentinel.get_multiplexed_async_connection().await?;
    let reply: RedisResult<std::collections::HashMap<String, String>> = redis::cmd("SENTINEL")
        .arg("MASTER")
        .arg(name)
        .query_async(&mut connection)
        .await;
    let fields = match reply {
        Ok(fields) => fields,
        Err(err) if err.detail().is_some_and(|d| d.contains("No such master")) => return Ok(None),
        Err(err) => return Err(err),
    };
    let field = |key: &str| fields.get(key).cloned().unwrap_or_default();
    let (Ok(port), Ok(epoch)) = (field("port").parse(), field("config-epoch").parse()) else {
        return Err(gone(format!(
            "a sentinel's answer on {name} lacks its port or epoch"
        )));
    };
    let settled = !field("flags").contains("failover_in_progress");
    Ok(Some(Named {
        rank: (epoch, settled),
        ip: field("ip"),
        port,
    }))
}

/// A transient failure (the master is gone or not there yet).
pub(super) fn gone(why: String) -> RedisError {
    RedisError::from(std::io::Error::new(std::io::ErrorKind::NotConnected, why))
}
