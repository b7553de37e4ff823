-- Ends a fair lock's lease, or withdraws a waiter's ticket, and tells the
-- waiters when the first place was freed.
--
-- KEYS[1]  the queue (see fair_acquire.lua)
-- ARGV[1]  the owner value; ARGV[2] the release channel
--
-- Replies 1 if a live lease or ticket was ended, 0 if the owner had none
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
local token, expiry, seq = string.match(value, '^1|(%d+)|(%d+)|(%d+)$')
local live = tonumber(expiry) > now
local first = live and token ~= '0'
if live and not first then
  -- A ticket: the first place is freed only if no live entry was ahead.
  first = true
  seq = tonumber(seq)
  local all = redis.call('HGETALL', queue)
  for i = 1, #all, 2 do
    local expires, other = string.match(all[i + 1], '^1|%d+|(%d+)|(%d+)$')
    if other and tonumber(other) < seq and tonumber(expires) > now then first = false end
  end
end
-- Published first, so that a denied PUBLISH (ACL) fails the release whole.
if first then redis.call('PUBLISH', channel, '1') end
redis.call('HDEL', queue, owner)
-- Only the sequence left: nothing stays behind.
if redis.call('HLEN', queue) <= 1 then redis.call('DEL', queue) end
if live then return 1 end
return 0
