//! The Lua scripts of the Redis backend, each one `redis::Script` built once
//! (EVALSHA, reloaded on NOSCRIPT by redis-rs).
//!
//! Keys: `KEYS[1]` the lease, valued `<owner>|<token>` with PX ttl, plus
//! `|w` once another client has found it held (a waiter: only then does
//! the release publish); `KEYS[2]` the token record, which exists only
//! while the newest token is ahead of the server clock. Tokens are
//! `max(last + 1, server time in microseconds)`, so they keep rising after
//! a restart without persistence or a promotion of a replica that missed the
//! last writes (the clock kept moving). A token is nearly always behind the clock by the time its lease
//! ends, so the common path touches the lease key alone and nothing is left
//! behind after release; the record is written only when a token could
//! outlive its lease while still ahead of the clock (tokens minted faster
//! than one per microsecond, or a clock stepped back).

use std::sync::LazyLock;

use redis::Script;

// Every line below runs on each lock and release, so the scripts are
// written for the server's CPU (counted with callgrind): no helper
// closures (each costs a Lua allocation per call; shared conditions are
// spliced in as text instead), no `string.format` on the common path
// (glibc's `%.0f` is dearer than the SET), and a token built from TIME's
// digits instead of parsed and printed back.

/// Lua condition: the lease value `holder` is `<owner>|...`, for the Lua
/// expression `owner` (124 is `|`; `n` is the owner's length).
macro_rules! held_by {
    ($owner:literal) => {
        concat!(
            "string.byte(holder, n + 1) == 124 and string.sub(holder, 1, n) == ",
            $owner
        )
    };
}

/// Lua expression: the token digits of a lease value held by the caller.
macro_rules! caller_token {
    () => {
        "string.match(holder, '^%d+', n + 2)"
    };
}

/// Lua condition: the lease value `holder` carries the waiter mark `|w`
/// (119 is `w`).
macro_rules! marked {
    () => {
        "string.byte(holder, -1) == 119"
    };
}

/// Lua statements that take the lease `lease` for `owner` for `extra` ms,
/// with the token record `fence`; `n` is `#owner`; `t` is the server's
/// TIME, `clock` its digits and `now` its microseconds, each computed once
/// per script call when first needed. Sets `r` to the token (digits) if
/// taken, or to the integer `-1 - pttl` if held: `0` for a holder without
/// expiry, `-(ms + 1)` else. Finding the lease held marks it `|w`, so its
/// release publishes.
macro_rules! acquire_body {
    () => {
        concat!(
            r#"
local found = redis.call('MGET', lease, fence)
local holder = found[1]
if holder then
  if "#,
            held_by!("owner"),
            r#" then
    -- Ours, from an earlier send of this acquire: its lease starts now
    -- (a write, so that WAIT on this connection covers the lease too).
    redis.call('PEXPIRE', lease, extra)
    r = "#,
            caller_token!(),
            r#"
  else
    -- APPEND keeps the lease's expiry.
    if not ("#,
            marked!(),
            r#") then redis.call('APPEND', lease, '|w') end
    r = -1 - redis.call('PTTL', lease)
  end
else
  if not clock then
    if not t then t = redis.call('TIME') end
    clock = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
  end
  local token = clock
  local last = found[2]
  if last then
    -- A token record leads the clock: go one past it, and keep a record
    -- for as long as the new token could outlive its lease ahead of the clock.
    local at = tonumber(clock)
    local next = math.max(at, tonumber(last) + 1)
    token = string.format('%.0f', next)
    if next >= at + tonumber(extra) * 1000 then
      redis.call('SET', fence, token, 'PX', math.floor((next - at) / 1000) + 1)
    end
  end
  redis.call('SET', lease, owner .. '|' .. token, 'PX', extra)
  r = token
end
"#
        )
    };
}

/// Lua statements that give back the lease `lease` if `owner` holds it and
/// publish on the channel `extra` if another client found it held (`|w`):
/// an uncontended lock costs no PUBLISH. Sets `r` to 1 if released, 0 if
/// not the owner. Names as in [`acquire_body`].
macro_rules! release_body {
    () => {
        concat!(
            r#"
local holder = redis.call('GET', lease)
if not holder or not ("#,
            held_by!("owner"),
            r#") then
  r = 0
else
  -- Published first: a denied PUBLISH (ACL) then fails the release whole.
  if "#,
            marked!(),
            r#" then redis.call('PUBLISH', extra, '1') end
  redis.call('DEL', lease)
  if not now then
    if not t then t = redis.call('TIME') end
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  local token = tonumber("#,
            caller_token!(),
            r#")
  -- Released while still ahead of the clock: the next token must pass it.
  if token >= now then
    redis.call('SET', fence, string.format('%.0f', token), 'PX', math.floor((token - now) / 1000) + 1)
  end
  r = 1
end
"#
        )
    };
}

/// Lua: the names the bodies use, for the single-operation scripts.
macro_rules! one_operation {
    () => {
        r#"
local lease, fence, owner, extra = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local n = #owner
local t, clock, now, r
"#
    };
}

/// ARGV: owner, ttl ms. Replies as [`acquire_body`] sets `r`.
const ACQUIRE: &str = concat!(one_operation!(), acquire_body!(), "return r\n");

/// ARGV: owner, ttl ms. Returns 1 if renewed, 0 if the owner is gone.
const RENEW: &str = concat!(
    r#"
local holder = redis.call('GET', KEYS[1])
local n = #ARGV[1]
if not holder or not ("#,
    held_by!("ARGV[1]"),
    r#") then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"#
);

/// ARGV: owner, release channel. Replies as [`release_body`] sets `r`.
const RELEASE: &str = concat!(one_operation!(), release_body!(), "return r\n");

/// KEYS: the lease and the token record of each operation in turn. ARGV:
/// three per operation: `a` (acquire) or `r` (release), the owner, then the
/// ttl in ms (acquire) or the release channel (release). Runs the operations
/// in order, each as ACQUIRE or RELEASE would, and replies with one value per
/// operation as they do. TIME is read once per call, by the first operation
/// that needs it; a token record keeps tokens of one key rising within a call.
const BATCH: &str = concat!(
    r#"
local t, clock, now
local out = {}
for i = 1, #KEYS / 2 do
  local lease, fence = KEYS[2 * i - 1], KEYS[2 * i]
  local owner, extra = ARGV[3 * i - 1], ARGV[3 * i]
  local n = #owner
  local r
  if ARGV[3 * i - 2] == 'a' then
"#,
    acquire_body!(),
    r#"
  else
"#,
    release_body!(),
    r#"
  end
  out[i] = r
end
return out
"#
);

pub(super) static ACQUIRE_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(ACQUIRE));
pub(super) static RENEW_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(RENEW));
pub(super) static RELEASE_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE));
pub(super) static BATCH_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(BATCH));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spliced_conditions_read_as_lua() {
        assert!(ACQUIRE.contains("if string.byte(holder, n + 1) == 124 and"));
        assert!(RENEW.contains("if not holder or not (string.byte(holder, n + 1)"));
        assert!(RELEASE.contains("local token = tonumber(string.match(holder, '^%d+', n + 2))"));
        assert!(RELEASE.contains("if string.byte(holder, -1) == 119 then redis.call('PUBLISH'"));
        assert!(ACQUIRE.contains("redis.call('PEXPIRE', lease, extra)\n    r = string.match("));
        assert!(BATCH.contains("string.sub(holder, 1, n) == owner then"));
    }
}
