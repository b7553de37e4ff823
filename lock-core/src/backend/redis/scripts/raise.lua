-- Raises the token of a lease its owner holds (RedLock's second phase:
-- each master of the quorum then names the token the holder was given,
-- and mints every later token of the key above it).
--
-- KEYS[1]  the lease; KEYS[2] the token record (see acquire.lua)
-- ARGV[1]  the owner value; ARGV[2] the token, above the lease's own
--
-- Replies 1 if raised, 0 if the owner does not hold the lease (nothing is
-- changed then), or `format:<version>` for a lease of another format.
local lease, fence, owner, raised = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local n = #owner
local holder = redis.call('GET', lease)
if not holder then return 0 end
-- 49 is `1`, 124 is `|`, 119 is `w`.
if string.byte(holder, 1) ~= 49 or string.byte(holder, 2) ~= 124 then
  return 'format:' .. (string.match(holder, '^(%d+)|') or '0')
end
if not (string.byte(holder, n + 3) == 124 and string.sub(holder, 3, n + 2) == owner) then
  return 0
end
local token = tonumber(raised)
-- Never lowered (a raise sent again after a later one).
if token <= tonumber(string.match(holder, '^%d+', n + 4)) then return 1 end
local mark = ''
if string.byte(holder, -1) == 119 then mark = '|w' end
redis.call('SET', lease, '1|' .. owner .. '|' .. raised .. mark, 'KEEPTTL')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- Recorded as a mint is (see acquire.lua), so that the next token passes
-- it even if the lease runs out unreleased; a higher record is kept.
local last = redis.call('GET', fence)
-- A record of another format is left alone, as acquire.lua leaves it.
local ours = not last or (string.byte(last, 1) == 49 and string.byte(last, 2) == 124)
if ours and (not last or tonumber(string.sub(last, 3)) < token) then
  redis.call('SET', fence, '1|' .. raised, 'PX', math.max(math.floor((token - now) / 1000), 0) + 10000)
end
return 1
