//! What Redis holds, for operators: one key's holders and queue entries, the
//! keys held (a `SCAN`, on every master of a cluster) and force-release.

use std::collections::HashSet;
use std::time::Duration;

use redis::Value;
use redis::aio::ConnectionLike;

use super::keys::{channel, fence};
use super::scripts::{FORCE_RELEASE_OWNER_SCRIPT, FORCE_RELEASE_SCRIPT, INSPECT_SCRIPT};
use super::wait::Masters;
use super::{RedisBackend, bounded};
use crate::backend::stored_keys::StoredKeys;
use crate::error::StoreError;
use crate::inspect::{ForceReleased, Holder, Inspection, MAX_LISTED, Pattern, user_key_of};
use crate::kind::LockKind;
use crate::token::FencingToken;
use crate::waiters::{Unlisted, Waiter, Waiters};

/// Keys asked for per `SCAN` step.
const SCAN_COUNT: usize = 1000;

/// A script call on the key's five kinds of stored names (and `extra`).
fn on_every_kind<'s>(script: &'s redis::Script, keys: &StoredKeys) -> redis::ScriptInvocation<'s> {
    let mut call = script.key(keys.lease());
    call.key(keys.of_kind(LockKind::Fair))
        .key(keys.of_kind(LockKind::Read))
        .key(keys.of_kind(LockKind::Permit { of: 1 }))
        .key(keys.of_kind(LockKind::Segment { of: 1 }));
    call
}

fn unexpected(what: &str) -> StoreError {
    StoreError::not_applied(format!("an unexpected reply to {what}"))
}

/// The kind a holder's tag in inspect.lua's reply names.
fn kind_of(tag: &str) -> Option<LockKind> {
    let number = || tag[1..].parse().ok();
    Some(match tag.as_bytes().first()? {
        b'x' => LockKind::Exclusive,
        b'f' => LockKind::Fair,
        b'r' => LockKind::Read,
        b'w' => LockKind::Write,
        b'p' => LockKind::Permit { of: number()? },
        b's' => LockKind::Segment { of: number()? },
        _ => return None,
    })
}

/// Reads inspect.lua's reply.
fn inspection(keys: &StoredKeys, reply: Vec<Value>) -> Option<Inspection> {
    let mut values = reply.into_iter();
    let queued: usize = redis::from_redis_value(values.next()?).ok()?;
    let marked: i64 = redis::from_redis_value(values.next()?).ok()?;
    let listed: usize = redis::from_redis_value(values.next()?).ok()?;
    let mut seen = Inspection::new(keys.user());
    let unlisted = if marked == 1 {
        Unlisted::SomeoneWaited
    } else {
        Unlisted::Unknown
    };
    seen.waiters = Waiters::new(queued, unlisted);
    let text = |v: Value| redis::from_redis_value::<String>(v).ok();
    for _ in 0..listed {
        let (kind, owner) = (text(values.next()?)?, text(values.next()?)?);
        seen.waiters.queue.push(Waiter::new(kind_of(&kind)?, owner));
    }
    let rest: Vec<Value> = values.collect();
    for holder in rest.chunks(6) {
        let [kind, owner, token, remaining, age, segment] = holder else {
            return None;
        };
        let text = |v: &Value| redis::from_redis_value::<String>(v.clone()).ok();
        let number = |v: &Value| redis::from_redis_value::<i64>(v.clone()).ok();
        let token: u64 = text(token)?.parse().ok()?;
        let mut found = Holder::new(
            kind_of(&text(kind)?)?,
            text(owner)?,
            FencingToken::new(token),
        );
        if let Ok(ms) = u64::try_from(number(remaining)?) {
            found = found.remaining(Duration::from_millis(ms));
        }
        if let Ok(ms) = u64::try_from(number(age)?) {
            found = found.age(Duration::from_millis(ms));
        }
        if let Ok(segment) = u32::try_from(number(segment)?) {
            found = found.segment(segment);
        }
        seen.holders.push(found);
    }
    Some(seen)
}

impl<C> RedisBackend<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// Ends `owner`'s plain lease of `keys` whatever it holds and wakes the
    /// waiters (RedLock's force-release, master by master): the token of the
    /// lease ended, `None` if `owner` did not hold it.
    pub(crate) async fn force_release_owner(
        &self,
        keys: &StoredKeys,
        owner: &str,
    ) -> Result<Option<FencingToken>, StoreError> {
        let mut call = FORCE_RELEASE_OWNER_SCRIPT.key(keys.lease());
        call.arg(owner)
            .arg(channel(keys))
            .arg(self.publish.command());
        let ended = self.script::<String>(&call).await?.reply;
        let token: u64 = ended
            .parse()
            .map_err(|_| unexpected("force_release_owner.lua"))?;
        Ok((token > 0).then(|| FencingToken::new(token)))
    }

    pub(super) async fn inspection_of(&self, keys: &StoredKeys) -> Result<Inspection, StoreError> {
        let call = on_every_kind(&INSPECT_SCRIPT, keys);
        let sent = self.script::<Vec<Value>>(&call).await?;
        inspection(keys, sent.reply).ok_or_else(|| unexpected("inspect.lua"))
    }

    pub(super) async fn force_release_all(
        &self,
        keys: &StoredKeys,
    ) -> Result<ForceReleased, StoreError> {
        let mut call = on_every_kind(&FORCE_RELEASE_SCRIPT, keys);
        call.key(fence(keys))
            .arg(channel(keys))
            .arg(self.publish.command());
        let sent = self.script::<(usize, String)>(&call).await?;
        let (removed, up_to) = sent.reply;
        let up_to = up_to.parse().map_err(|_| unexpected("force_release.lua"))?;
        Ok(ForceReleased::new(removed, Some(FencingToken::new(up_to))))
    }

    /// The held keys: a `SCAN` of each master of a cluster, else of the
    /// server (one node of a cluster connection given to `with_connection`).
    pub(super) async fn held_keys_matching(
        &self,
        namespace: &str,
        pattern: &Pattern,
    ) -> Result<Vec<String>, StoreError> {
        let mut held = HashSet::new();
        if let Some(Masters::Slots(slots)) = self.waits.as_ref().map(|w| &w.masters) {
            for master in slots.masters().await? {
                let client = slots.client(&master)?;
                let connection = bounded(self.timeout, client.get_multiplexed_async_connection());
                let connection = connection.await?;
                self.scan(connection, namespace, pattern, &mut held).await?;
            }
        } else {
            self.scan(self.connection.clone(), namespace, pattern, &mut held)
                .await?;
        }
        Ok(held.into_iter().collect())
    }

    /// Adds the keys held on `connection`'s server to `held`, until there
    /// are [`MAX_LISTED`].
    async fn scan<K: ConnectionLike + Send>(
        &self,
        mut connection: K,
        namespace: &str,
        pattern: &Pattern,
        held: &mut HashSet<String>,
    ) -> Result<(), StoreError> {
        let mut cursor = 0u64;
        loop {
            let mut scan = redis::cmd("SCAN");
            scan.arg(cursor)
                .arg("MATCH")
                .arg(format!("{namespace}:{{*"))
                .arg("COUNT")
                .arg(SCAN_COUNT);
            let (next, names): (u64, Vec<String>) =
                bounded(self.timeout, scan.query_async(&mut connection)).await?;
            let found = names.iter().filter_map(|name| user_key_of(name, namespace));
            held.extend(found.filter(|key| pattern.matches(key)));
            if next == 0 || held.len() >= MAX_LISTED {
                return Ok(());
            }
            cursor = next;
        }
    }
}
