-- Ends a fair lock's lease, or withdraws a waiter's queue entry, and tells the
-- next waiter when the first place was freed: on its own channel, so that
-- no other waiter wakes.
--
-- KEYS[1]  the queue (see fair_acquire.lua)
-- ARGV[1]  the owner value; ARGV[2] the release channel, to which the
--          next waiter's `:<owner>` is appended
-- ARGV[3]  `PUBLISH`, or `SPUBLISH` on a Redis Cluster (see release.lua)
--
-- Replies 1 if a live lease or queue entry was ended, 0 if the owner had none
-- (an expired one is removed), or `format:<version>` for a value of
-- another format.
local queue, owner, channel = KEYS[1], ARGV[1], ARGV[2]
local value = redis.call('HGET', queue, owner)
if not value then return 0 end
-- 49 is `1`, 124 is `|`.
if string.byte(value, 1) ~= 49 or string.byte(value, 2) ~= 124 then
  return 'format:' .. (string.match(value, '^(%d+)|') or '0')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry, seq = string.match(value, '^1|%d+|(%d+)|(%d+)$')
local live = tonumber(expiry) > now
seq = tonumber(seq)
-- The first live entry after this one is next; any live one before it
-- keeps the first place taken.
local first, next, next_seq = live, nil, nil
if live then
  local all = redis.call('HGETALL', queue)
  for i = 1, #all, 2 do
    local other_expiry, other = string.match(all[i + 1], '^1|%d+|(%d+)|(%d+)$')
    if other and all[i] ~= owner and tonumber(other_expiry) > now then
      other = tonumber(other)
      if other < seq then first = false end
      if not next_seq or other < next_seq then next, next_seq = all[i], other end
    end
  end
end
-- Published first, so that a denied PUBLISH (ACL) fails the release whole.
if first and next then redis.call(ARGV[3], channel .. ':' .. next, '1') end
redis.call('HDEL', queue, owner)
-- Only the sequence left: nothing stays behind.
if redis.call('HLEN', queue) <= 1 then redis.call('DEL', queue) end
if live then return 1 end
return 0
