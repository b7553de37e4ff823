-- Extends a lease if the owner still holds it.
--
-- KEYS[1]  the lease (see acquire.lua)
-- ARGV[1]  the owner value; ARGV[2] the ttl in ms
--
-- Replies 1 if renewed, 0 if the lease is gone or has another owner, or
-- `format:<version>` for a lease of another format (see acquire.lua).
local holder = redis.call('GET', KEYS[1])
if not holder then return 0 end
-- 49 is `1`, 124 is `|`.
if string.byte(holder, 1) ~= 49 or string.byte(holder, 2) ~= 124 then
  return 'format:' .. (string.match(holder, '^(%d+)|') or '0')
end
local n = #ARGV[1]
if not (string.byte(holder, n + 3) == 124 and string.sub(holder, 3, n + 2) == ARGV[1]) then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
