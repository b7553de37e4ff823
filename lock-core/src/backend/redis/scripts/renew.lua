-- Extends a lease if the owner still holds it.
--
-- KEYS[1]  the lease (see acquire.lua)
-- ARGV[1]  the owner value; ARGV[2] the ttl in ms
--
-- Replies 1 if renewed, 0 if the lease is gone or has another owner, or
-- `format:<version>` for a lease of another format (see acquire.lua).
local holder = redis.call('GET', KEYS[1])
if not holder then return 0 end
local mine = '1|' .. ARGV[1] .. '|'
if string.sub(holder, 1, #mine) ~= mine then
  if string.sub(holder, 1, 2) ~= '1|' then
    return 'format:' .. (string.match(holder, '^(%d+)|') or '0')
  end
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
