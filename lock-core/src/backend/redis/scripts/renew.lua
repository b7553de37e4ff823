-- Extends a lease if the owner still holds it.
--
-- KEYS[1]  the lease (see acquire.lua)
-- ARGV[1]  the owner value; ARGV[2] the ttl in ms
--
-- Replies 1 if renewed, 0 if the lease is gone or has another owner.
local holder = redis.call('GET', KEYS[1])
local n = #ARGV[1]
if not holder or not (string.byte(holder, n + 1) == 124 and string.sub(holder, 1, n) == ARGV[1]) then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
