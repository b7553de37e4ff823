//! The Lua scripts of the Redis backend, each one `redis::Script` built once
//! (EVALSHA, reloaded on NOSCRIPT by redis-rs).
//!
//! Keys: `KEYS[1]` the lease, valued `<owner>|<token>` with PX ttl;
//! `KEYS[2]` the token record, which exists only while the newest token is
//! ahead of the server clock. Tokens are `max(last + 1, server time in
//! microseconds)`, so they keep rising after a restart without persistence or
//! a promotion of a replica that missed the last writes (the clock kept
//! moving). A token is nearly always behind the clock by the time its lease
//! ends, so the common path touches the lease key alone and nothing is left
//! behind after release; the record is written only when a token could
//! outlive its lease while still ahead of the clock (tokens minted faster
//! than one per microsecond, or a clock stepped back).

use std::sync::LazyLock;

use redis::Script;

/// Shared helpers, prepended to each script.
const PRELUDE: &str = r#"
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
-- Milliseconds a record of `token` must live beyond now so that the next
-- token minted from the clock alone is still greater.
local function lag_ms(token, now)
  if token < now then return 0 end
  return math.floor((token - now) / 1000) + 1
end
local function remember(key, token, now)
  local lag = lag_ms(token, now)
  if lag > 0 then
    redis.call('SET', key, string.format('%.0f', token), 'PX', lag)
  end
end
-- The token of a lease value if `owner` holds it, else nil.
local function token_of(value, owner)
  local n = #owner
  if string.byte(value, n + 1) == 124 and string.sub(value, 1, n) == owner then
    return tonumber(string.sub(value, n + 2))
  end
  return nil
end
"#;

/// ARGV: owner, ttl ms. Returns `{1, token}` or `{0, pttl of the holder}`.
const ACQUIRE: &str = r#"
local holder = redis.call('GET', KEYS[1])
if holder then
  local mine = token_of(holder, ARGV[1])
  if mine then return {1, mine} end
  return {0, redis.call('PTTL', KEYS[1])}
end
local now = now_us()
local token = now
local last = redis.call('GET', KEYS[2])
if last then token = math.max(now, tonumber(last) + 1) end
local ttl = tonumber(ARGV[2])
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. string.format('%.0f', token), 'PX', ttl)
-- The lease may expire while the token is still ahead of the clock.
if token >= now + ttl * 1000 then remember(KEYS[2], token, now) end
return {1, token}
"#;

/// ARGV: owner, ttl ms. Returns 1 if renewed, 0 if the owner is gone.
const RENEW: &str = r#"
local holder = redis.call('GET', KEYS[1])
if not holder or not token_of(holder, ARGV[1]) then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"#;

/// ARGV: owner, release channel. Returns 1 if released, 0 if not the owner.
const RELEASE: &str = r#"
local holder = redis.call('GET', KEYS[1])
local token = holder and token_of(holder, ARGV[1])
if not token then return 0 end
redis.call('DEL', KEYS[1])
local now = now_us()
if token >= now then remember(KEYS[2], token, now) end
redis.call('PUBLISH', ARGV[2], '1')
return 1
"#;

fn build(body: &str) -> Script {
    Script::new(&format!("{PRELUDE}{body}"))
}

pub(super) static ACQUIRE_SCRIPT: LazyLock<Script> = LazyLock::new(|| build(ACQUIRE));
pub(super) static RENEW_SCRIPT: LazyLock<Script> = LazyLock::new(|| build(RENEW));
pub(super) static RELEASE_SCRIPT: LazyLock<Script> = LazyLock::new(|| build(RELEASE));
