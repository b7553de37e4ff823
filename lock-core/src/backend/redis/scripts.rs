//! The Lua scripts of the Redis backend, each one `redis::Script` built once
//! (EVALSHA, reloaded on NOSCRIPT by redis-rs).
//!
//! Keys: `KEYS[1]` the lease (owner value, PX ttl), `KEYS[2]` the token
//! record. Tokens are `max(last + 1, server time in microseconds)`, so they
//! keep rising after a restart without persistence or a promotion of a
//! replica that missed the last increments (the clock kept moving). The token
//! record outlives the lease only until the server clock has passed the
//! token, so nothing is left behind after release.

use std::sync::LazyLock;

use redis::Script;

/// Shared helpers, prepended to each script.
const PRELUDE: &str = r#"
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
-- Milliseconds the token record must live beyond now so that the next token
-- minted from the clock alone is still greater.
local function lag_ms(token, now)
  if token < now then return 0 end
  return math.floor((token - now) / 1000) + 1
end
"#;

/// ARGV: owner, ttl ms. Returns `{1, token}` or `{0, pttl of the holder}`.
const ACQUIRE: &str = r#"
local holder = redis.call('GET', KEYS[1])
if holder then
  if holder == ARGV[1] then
    return {1, tonumber(redis.call('GET', KEYS[2]) or '0')}
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
local now = now_us()
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
local token = now
if last >= now then token = last + 1 end
local ttl = tonumber(ARGV[2])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
redis.call('SET', KEYS[2], string.format('%.0f', token), 'PX', ttl + lag_ms(token, now))
return {1, token}
"#;

/// ARGV: owner, ttl ms. Returns 1 if renewed, 0 if the owner is gone.
const RENEW: &str = r#"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local ttl = tonumber(ARGV[2])
redis.call('PEXPIRE', KEYS[1], ttl)
local token = tonumber(redis.call('GET', KEYS[2]) or '0')
if token > 0 then
  redis.call('PEXPIRE', KEYS[2], ttl + lag_ms(token, now_us()))
end
return 1
"#;

/// ARGV: owner, release channel. Returns 1 if released, 0 if not the owner.
const RELEASE: &str = r#"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
local token = tonumber(redis.call('GET', KEYS[2]) or '0')
local lag = lag_ms(token, now_us())
if lag == 0 then
  redis.call('DEL', KEYS[2])
else
  redis.call('PEXPIRE', KEYS[2], lag)
end
redis.call('PUBLISH', ARGV[2], '1')
return 1
"#;

fn build(body: &str) -> Script {
    Script::new(&format!("{PRELUDE}{body}"))
}

pub(super) static ACQUIRE_SCRIPT: LazyLock<Script> = LazyLock::new(|| build(ACQUIRE));
pub(super) static RENEW_SCRIPT: LazyLock<Script> = LazyLock::new(|| build(RENEW));
pub(super) static RELEASE_SCRIPT: LazyLock<Script> = LazyLock::new(|| build(RELEASE));
