-- Extends a lease kept as a hash entry (a semaphore permit, a striped
-- segment, a fair lock's holder, a reader or writer) if the owner still
-- holds it.
--
-- KEYS[1]  the hash: owner -> `1|<token>|<expiry in ms>|<rest>` (see
--          permit_acquire.lua, fair_acquire.lua, rw_acquire.lua); token 0
--          is a waiter's queue entry, which holds nothing
-- ARGV[1]  the owner value; ARGV[2] the ttl in ms
--
-- Replies 1 if renewed, 0 if the lease is gone, or `format:<version>` for
-- a value of another format.
local entries, owner, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])
local value = redis.call('HGET', entries, owner)
if not value then return 0 end
-- 49 is `1`, 124 is `|`.
if string.byte(value, 1) ~= 49 or string.byte(value, 2) ~= 124 then
  return 'format:' .. (string.match(value, '^(%d+)|') or '0')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token, expiry, rest = string.match(value, '^1|(%d+)|(%d+)|(.*)$')
if token == '0' or tonumber(expiry) <= now then return 0 end
redis.call('HSET', entries, owner, '1|' .. token .. '|' .. (now + ttl) .. '|' .. rest)
if redis.call('PTTL', entries) < ttl then redis.call('PEXPIRE', entries, ttl) end
return 1
