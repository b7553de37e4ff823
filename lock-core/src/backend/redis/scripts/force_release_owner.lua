-- Ends one owner's lease whoever waits, for an operator's force-release
-- over RedLock's masters (force_release.lua ends whatever one server
-- holds), and wakes the lock's waiters. Owner-checked: a master the
-- force-release reaches late keeps a lease that a waiter it woke on another
-- master has taken here since.
--
-- KEYS[1]  the lease
-- ARGV[1]  the owner value; ARGV[2] the release channel; ARGV[3] `PUBLISH`,
--          or `SPUBLISH` on a Redis Cluster (see release.lua)
--
-- Replies the token of the lease it ended (a number's digits), or 0 if the
-- owner did not hold it (nothing is changed then).
local owner = ARGV[1]
local n = #owner
local holder = redis.call('GET', KEYS[1])
-- 124 is `|`.
if not holder or string.sub(holder, 1, 2) ~= '1|' or string.sub(holder, 3, n + 2) ~= owner
    or string.byte(holder, n + 3) ~= 124 then
  return 0
end
redis.call(ARGV[3], ARGV[2], '1')
redis.call('DEL', KEYS[1])
return string.match(holder, '^(%d+)', n + 4) or '0'
