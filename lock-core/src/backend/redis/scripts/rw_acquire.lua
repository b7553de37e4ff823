-- Takes a read or write lease, marks the key for a waiting writer, or
-- says how long until the writer ahead is gone.
--
-- KEYS[1]  the holders: a hash of owner -> `1|<token>|<expiry in ms>|r`
--          (a reader) or `|w` (a writer), and `~` ->
--          `1|0|<expiry in ms>|<owner>`, the mark of the first writer
--          waiting, which keeps new readers out; it expires with its last
--          entry
-- KEYS[2]  the token record `1|<token>` (see acquire.lua)
-- KEYS[3]  the plain lock's lease on the key, whose token a new one passes
-- ARGV[1]  the owner value; ARGV[2] the ttl in ms, of a lease and of a
--          mark alike; ARGV[3] `r` or `w`
--
-- Replies the token (digits) when taken (the owner's own, restarted, if it
-- holds), `queued:<ms>` when this writer's mark stands (ask again within
-- that many ms), else the integer `-1 - ms` until the writer ahead could
-- be gone; `format:<version>` for a value of another format, changing
-- nothing then.
local holders, fence, owner = KEYS[1], KEYS[2], ARGV[1]
local ttl, mode = tonumber(ARGV[2]), ARGV[3]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', holders)
local live, top, expired = 0, 0, {}
local mine, mine_mode, soonest, writer, marked_by, marked_until = nil, nil, nil, nil, nil, nil
for i = 1, #all, 2 do
  local field, value = all[i], all[i + 1]
  -- 49 is `1`, 124 is `|`.
  if string.byte(value, 1) ~= 49 or string.byte(value, 2) ~= 124 then
    return 'format:' .. (string.match(value, '^(%d+)|') or '0')
  end
  local token, expiry, rest = string.match(value, '^1|(%d+)|(%d+)|(.*)$')
  expiry = tonumber(expiry)
  if expiry <= now then
    expired[#expired + 1] = field
  elseif field == '~' then
    marked_by, marked_until = rest, expiry
  else
    live = live + 1
    if field == owner then mine, mine_mode = token, rest end
    if rest == 'w' then writer = expiry end
    if tonumber(token) > top then top = tonumber(token) end
    if not soonest or expiry < soonest then soonest = expiry end
  end
end
local last = redis.call('GET', fence)
if last and (string.byte(last, 1) ~= 49 or string.byte(last, 2) ~= 124) then
  return 'format:' .. (string.match(last, '^(%d+)|') or '0')
end
if #expired > 0 then redis.call('HDEL', holders, unpack(expired)) end
if mine then
  redis.call('HSET', holders, owner, '1|' .. mine .. '|' .. (now + ttl) .. '|' .. mine_mode)
  if redis.call('PTTL', holders) < ttl then redis.call('PEXPIRE', holders, ttl) end
  return mine
end
local other_mark = marked_by and marked_by ~= owner
local free
if mode == 'w' then free = live == 0 and not other_mark else free = not writer and not other_mark end
if free then
  if marked_by == owner then redis.call('HDEL', holders, '~') end
  -- Mint past the clock, the record, every live holder's token and the
  -- plain lock's, and record it until the clock is 10 s past it (see
  -- acquire.lua), so that every kind of lock on the key mints above it.
  local at = tonumber(t[1] .. string.rep('0', 6 - #t[2]) .. t[2])
  local next = math.max(at, top + 1)
  if last then next = math.max(next, tonumber(string.sub(last, 3)) + 1) end
  local plain = redis.call('GET', KEYS[3])
  local held = plain and string.match(plain, '^1|[^|]*|(%d+)')
  if held then next = math.max(next, tonumber(held) + 1) end
  local token = string.format('%.0f', next)
  redis.call('SET', fence, '1|' .. token, 'PX', math.floor((next - at) / 1000) + 10000)
  redis.call('HSET', holders, owner, '1|' .. token .. '|' .. (now + ttl) .. '|' .. mode)
  if redis.call('PTTL', holders) < ttl then redis.call('PEXPIRE', holders, ttl) end
  return token
end
if mode == 'w' and not other_mark then
  -- The first writer to wait: new readers wait behind it.
  redis.call('HSET', holders, '~', '1|0|' .. (now + ttl) .. '|' .. owner)
  if redis.call('PTTL', holders) < ttl then redis.call('PEXPIRE', holders, ttl) end
  return 'queued:' .. math.min(math.floor(ttl / 2), soonest - now)
end
-- Behind a writer that holds, or one that waits.
if mode == 'r' then return -1 - ((writer or marked_until) - now) end
return -1 - ((soonest or marked_until) - now)
