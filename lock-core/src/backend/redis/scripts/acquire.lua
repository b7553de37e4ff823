-- Takes a lease, or says how long its holder keeps it.
--
-- KEYS[1]  the lease, valued `1|<owner>|<token>` (then `|w` once a waiter
--          found it held), with a PX expiry
-- KEYS[2]  the token record `1|<token>`: the newest token, kept until the
--          server clock is 10 s past it
-- ARGV[1]  the owner value; ARGV[2] the ttl in ms
--
-- Every stored value starts with its format version, `1|`.
--
-- Replies the token (digits) when taken, else the integer `-1 - pttl` of
-- the holder (`0` for a holder without expiry), or `format:<version>` for
-- a value of another format (`0`: none), which it leaves alone. The same
-- owner gets its own token back, its lease restarted: the answer to an
-- earlier send of the same request that was lost on the way.
local lease, fence, owner, ttl = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local n = #owner
local found = redis.call('MGET', lease, fence)
local holder, last = found[1], found[2]
-- 49 is `1`, 124 is `|`: byte compares, cheaper than building strings.
local other = (holder and (string.byte(holder, 1) ~= 49 or string.byte(holder, 2) ~= 124) and holder)
  or (last and (string.byte(last, 1) ~= 49 or string.byte(last, 2) ~= 124) and last)
if other then return 'format:' .. (string.match(other, '^(%d+)|') or '0') end
if holder then
  if string.byte(holder, n + 3) == 124 and string.sub(holder, 3, n + 2) == owner then
    -- A write, so that WAIT on this connection covers the lease too.
    redis.call('PEXPIRE', lease, ttl)
    return string.match(holder, '^%d+', n + 4)
  end
  -- The waiter mark (119 is `w`) makes the release publish; APPEND keeps
  -- the lease's expiry.
  if string.byte(holder, -1) ~= 119 then redis.call('APPEND', lease, '|w') end
  return -1 - redis.call('PTTL', lease)
end
-- The token is the server clock in microseconds, built from TIME's digits
-- (cheaper than parsing and printing them back).
local t = redis.call('TIME')
local token = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
local lead = 0
if last then
  -- Go one past the record if the clock has not passed it.
  local at = tonumber(token)
  local next = math.max(at, tonumber(string.sub(last, 3)) + 1)
  token = string.format('%.0f', next)
  lead = math.floor((next - at) / 1000)
end
-- Every kind records each token it mints until the server clock is 10 s
-- past it, so that tokens keep rising when the clock steps back by up to
-- 10 s (a lease that outlives its record has a token the clock has left
-- more than 10 s behind).
redis.call('SET', fence, '1|' .. token, 'PX', lead + 10000)
redis.call('SET', lease, '1|' .. owner .. '|' .. token, 'PX', ttl)
return token
