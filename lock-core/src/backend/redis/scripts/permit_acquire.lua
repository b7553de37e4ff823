-- Takes one of a semaphore's permits, or one free segment of a striped
-- lock, or says how long until one frees up.
--
-- KEYS[1]  the permits (or segments): a hash of owner ->
--          `1|<token>|<expiry in ms>|<segment>`, and `#` -> `1|<number>`,
--          expiring with its last entry
-- KEYS[2]  the token record `1|<token>` (see acquire.lua): one token line
--          per key, shared with the key's other kinds of lock
-- KEYS[3]  the plain lock's lease on the key, whose token a new one passes
-- ARGV[1]  the owner value; ARGV[2] the ttl in ms; ARGV[3] the number of
--          permits (or segments); ARGV[4] `s` to be answered the segment
--
-- Replies the token (digits) when taken (the owner's own, its permit
-- restarted, if it holds one), with ARGV[4] `s` the pair {token, segment}
-- (the lowest free one), else the integer `-1 - ms` until the first
-- permit ends; `permits:<n>` when the holders use another number of
-- permits, or `format:<version>` for a value of another format, changing
-- nothing then.
--
-- Permits are held side by side, so a new token must pass the live ones
-- too, and the plain lock's; it is recorded until the clock is 10 s past
-- it (see acquire.lua), so that the next permit, or any other kind of lock
-- on the key, mints above it even within the same microsecond.
local permits, fence, owner = KEYS[1], KEYS[2], ARGV[1]
local ttl, of = tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', permits)
local last = redis.call('GET', fence)
local stored, live, soonest, mine, top, expired = nil, 0, nil, nil, 0, {}
local used, mine_segment = {}, 0
for i = 1, #all, 2 do
  local field, value = all[i], all[i + 1]
  -- 49 is `1`, 124 is `|`.
  if string.byte(value, 1) ~= 49 or string.byte(value, 2) ~= 124 then
    return 'format:' .. (string.match(value, '^(%d+)|') or '0')
  end
  if field == '#' then
    stored = tonumber(string.sub(value, 3))
  else
    local token, expiry, segment = string.match(value, '^1|(%d+)|(%d+)|(%d+)$')
    expiry = tonumber(expiry)
    if expiry <= now then
      expired[#expired + 1] = field
    else
      live = live + 1
      used[tonumber(segment)] = true
      if field == owner then mine, mine_segment = token, tonumber(segment) end
      if tonumber(token) > top then top = tonumber(token) end
      if not soonest or expiry < soonest then soonest = expiry end
    end
  end
end
if last and (string.byte(last, 1) ~= 49 or string.byte(last, 2) ~= 124) then
  return 'format:' .. (string.match(last, '^(%d+)|') or '0')
end
if #expired > 0 then redis.call('HDEL', permits, unpack(expired)) end
if mine then
  redis.call('HSET', permits, owner, '1|' .. mine .. '|' .. (now + ttl) .. '|' .. mine_segment)
  if redis.call('PTTL', permits) < ttl then redis.call('PEXPIRE', permits, ttl) end
  if ARGV[4] == 's' then return {mine, mine_segment} end
  return mine
end
-- Live permits without their number: not a hash these scripts wrote.
if live > 0 and not stored then return 'format:0' end
if live > 0 and stored ~= of then return 'permits:' .. stored end
if live >= of then return -1 - (soonest - now) end
local at = tonumber(t[1] .. string.rep('0', 6 - #t[2]) .. t[2])
local next = math.max(at, top + 1)
if last then next = math.max(next, tonumber(string.sub(last, 3)) + 1) end
local plain = redis.call('GET', KEYS[3])
local held = plain and string.match(plain, '^1|[^|]*|(%d+)')
if held then next = math.max(next, tonumber(held) + 1) end
local token = string.format('%.0f', next)
redis.call('SET', fence, '1|' .. token, 'PX', math.floor((next - at) / 1000) + 10000)
local segment = 0
while used[segment] do segment = segment + 1 end
redis.call('HSET', permits, owner, '1|' .. token .. '|' .. (now + ttl) .. '|' .. segment, '#', '1|' .. of)
if redis.call('PTTL', permits) < ttl then redis.call('PEXPIRE', permits, ttl) end
if ARGV[4] == 's' then return {token, segment} end
return token
