-- Takes a fair lock in the order its waiters first asked, or keeps the
-- waiter's entry in the queue.
--
-- KEYS[1]  the queue: a hash of owner -> `1|<token>|<expiry in ms>|<seq>`,
--          token 0 for a waiter's queue entry (the live entry with the lowest
--          seq is first, and holds once it has a token), and `#` ->
--          `1|<last seq>`, expiring with its last entry
-- KEYS[2]  the token record `1|<token>` (see acquire.lua)
-- KEYS[3]  the plain lock's lease on the key, whose token a new one passes
-- ARGV[1]  the owner value; ARGV[2] the ttl in ms, of a lease and of a
--          queue entry alike
--
-- Replies the token (digits) when the owner holds (its own, restarted, if
-- it held already), else `queued:<ms>`: ask again within that many ms (when
-- an entry ahead could lapse, halfway through the queue entry's lease at the
-- latest); `format:<version>` for a value of another format, changing
-- nothing then.
local queue, fence, owner = KEYS[1], KEYS[2], ARGV[1]
local ttl = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', queue)
local last_seq, expired, seqs, expiries = 0, {}, {}, {}
local mine_token, mine_seq, first = nil, nil, nil
for i = 1, #all, 2 do
  local field, value = all[i], all[i + 1]
  -- 49 is `1`, 124 is `|`.
  if string.byte(value, 1) ~= 49 or string.byte(value, 2) ~= 124 then
    return 'format:' .. (string.match(value, '^(%d+)|') or '0')
  end
  if field == '#' then
    last_seq = tonumber(string.sub(value, 3))
  else
    local token, expiry, seq = string.match(value, '^1|(%d+)|(%d+)|(%d+)$')
    expiry, seq = tonumber(expiry), tonumber(seq)
    if expiry <= now then
      expired[#expired + 1] = field
    else
      seqs[#seqs + 1], expiries[#expiries + 1] = seq, expiry
      if field == owner then mine_token, mine_seq = token, seq end
      if not first or seq < first then first = seq end
    end
  end
end
local last = redis.call('GET', fence)
if last and (string.byte(last, 1) ~= 49 or string.byte(last, 2) ~= 124) then
  return 'format:' .. (string.match(last, '^(%d+)|') or '0')
end
if #expired > 0 then redis.call('HDEL', queue, unpack(expired)) end
if not mine_seq then
  last_seq = last_seq + 1
  mine_token, mine_seq = '0', last_seq
  redis.call('HSET', queue, '#', '1|' .. last_seq)
  if not first then first = mine_seq end
end
if mine_seq == first then
  if mine_token == '0' then
    -- First in line and nobody holds: mint past the clock, the record and
    -- the plain lock's token, and record it until the clock is 10 s past it
    -- (see acquire.lua), so that every kind of lock on the key mints above
    -- it.
    local at = tonumber(t[1] .. string.rep('0', 6 - #t[2]) .. t[2])
    local next = at
    if last then next = math.max(next, tonumber(string.sub(last, 3)) + 1) end
    local plain = redis.call('GET', KEYS[3])
    local held = plain and string.match(plain, '^1|[^|]*|(%d+)')
    if held then next = math.max(next, tonumber(held) + 1) end
    mine_token = string.format('%.0f', next)
    redis.call('SET', fence, '1|' .. mine_token, 'PX', math.floor((next - at) / 1000) + 10000)
  end
  redis.call('HSET', queue, owner, '1|' .. mine_token .. '|' .. (now + ttl) .. '|' .. mine_seq)
  if redis.call('PTTL', queue) < ttl then redis.call('PEXPIRE', queue, ttl) end
  return mine_token
end
local wake = math.floor(ttl / 2)
for i = 1, #seqs do
  if seqs[i] < mine_seq and expiries[i] - now < wake then wake = expiries[i] - now end
end
redis.call('HSET', queue, owner, '1|0|' .. (now + ttl) .. '|' .. mine_seq)
if redis.call('PTTL', queue) < ttl then redis.call('PEXPIRE', queue, ttl) end
return 'queued:' .. wake
