-- Extends a semaphore permit (or striped segment) if the owner still holds
-- it.
--
-- KEYS[1]  the permits or segments (see permit_acquire.lua)
-- ARGV[1]  the owner value; ARGV[2] the ttl in ms
--
-- Replies 1 if renewed, 0 if the permit is gone, or `format:<version>` for
-- a value of another format.
local permits, owner, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])
local value = redis.call('HGET', permits, owner)
if not value then return 0 end
-- 49 is `1`, 124 is `|`.
if string.byte(value, 1) ~= 49 or string.byte(value, 2) ~= 124 then
  return 'format:' .. (string.match(value, '^(%d+)|') or '0')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token, expiry, segment = string.match(value, '^1|(%d+)|(%d+)|(%d+)$')
if tonumber(expiry) <= now then return 0 end
redis.call('HSET', permits, owner, '1|' .. token .. '|' .. (now + ttl) .. '|' .. segment)
if redis.call('PTTL', permits) < ttl then redis.call('PEXPIRE', permits, ttl) end
return 1
