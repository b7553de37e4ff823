-- Gives back a semaphore permit (or striped segment) if the owner holds
-- it, and tells waiters.
--
-- KEYS[1]  the permits or segments (KEYS[2], the token record, is left
--          alone: the acquire's record keeps the next token above this one)
-- ARGV[1]  the owner value; ARGV[2] the release channel
-- ARGV[3]  `PUBLISH`, or `SPUBLISH` on a Redis Cluster (see release.lua)
--
-- Replies 1 if released, 0 if the owner holds no live permit (an expired
-- one is removed), or `format:<version>` for a value of another format.
local permits, owner, channel = KEYS[1], ARGV[1], ARGV[2]
local value = redis.call('HGET', permits, owner)
if not value then return 0 end
-- 49 is `1`, 124 is `|`.
if string.byte(value, 1) ~= 49 or string.byte(value, 2) ~= 124 then
  return 'format:' .. (string.match(value, '^(%d+)|') or '0')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local expiry = string.match(value, '^1|%d+|(%d+)|%d+$')
local live = tonumber(expiry) * 1000 > now
-- Published first, so that a denied PUBLISH (ACL) fails the release whole.
if live then redis.call(ARGV[3], channel, '1') end
redis.call('HDEL', permits, owner)
-- Only the permit count left: nothing stays behind.
if redis.call('HLEN', permits) <= 1 then redis.call('DEL', permits) end
if not live then return 0 end
return 1
