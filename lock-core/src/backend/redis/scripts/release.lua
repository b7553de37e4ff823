-- Ends a lease if the owner holds it, and tells its waiters.
--
-- KEYS[1]  the lease (KEYS[2], the token record, is left alone: the
--          acquire's record keeps the next token above this one)
-- ARGV[1]  the owner value; ARGV[2] the release channel
-- ARGV[3]  `PUBLISH`, or `SPUBLISH` on a Redis Cluster (the channel is in
--          the lock's slot, so a release is heard on the slot's node alone)
--
-- Replies 1 if released, 0 if the owner does not hold the lease (nothing
-- is changed then), or `format:<version>` for a lease of another format
-- (see acquire.lua), which it leaves alone.
local lease, owner, channel = KEYS[1], ARGV[1], ARGV[2]
local n = #owner
local holder = redis.call('GET', lease)
if not holder then return 0 end
-- 49 is `1`, 124 is `|`.
if string.byte(holder, 1) ~= 49 or string.byte(holder, 2) ~= 124 then
  return 'format:' .. (string.match(holder, '^(%d+)|') or '0')
end
if not (string.byte(holder, n + 3) == 124 and string.sub(holder, 3, n + 2) == owner) then
  return 0
end
-- Only a lease a waiter found (`|w`) publishes: an uncontended lock costs
-- no PUBLISH. Published first, so that a denied PUBLISH (ACL) fails the
-- release whole.
if string.byte(holder, -1) == 119 then redis.call(ARGV[3], channel, '1') end
redis.call('DEL', lease)
return 1
