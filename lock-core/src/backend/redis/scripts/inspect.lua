-- Reads every holder and queue entry of every kind of lock on one key, for an
-- operator. Changes nothing.
--
-- KEYS[1]  the lease (see acquire.lua); KEYS[2] the fair queue (see
--          fair_acquire.lua); KEYS[3] the read-write holders (see
--          rw_acquire.lua); KEYS[4] the permits, KEYS[5] the segments (see
--          permit_acquire.lua)
--
-- Replies {queued waiters, 1 if a waiter marked the plain lease (else 0),
-- the number n of waiters listed, then n pairs (kind, owner): the fair
-- queue's waiters in line, then the waiting writer (the first 100); then
-- six values per live holder: kind, owner, token, remaining ms, age ms,
-- segment}. Kind is `x` (exclusive), `f` (fair), `r`,
-- `w`, `p<permits>` or `s<segments>`; the token is its digits; the age
-- comes from the token, which is this server's clock in microseconds when
-- minted (0 for one minted ahead of it); the segment is -1 but for a
-- striped lock. Values of another format are left out.
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)
local out = {0, 0, 0}
local holders = {}

local function add(kind, owner, token, remaining, segment)
  local age = math.floor((now_us - tonumber(token)) / 1000)
  if age < 0 then age = 0 end
  local n = #holders
  holders[n + 1], holders[n + 2], holders[n + 3] = kind, owner, token
  holders[n + 4], holders[n + 5], holders[n + 6] = remaining, age, segment or -1
end

-- A waiter in line: counted, and listed (its kind's tag and owner) while
-- fewer than 100 are (lock-core's MAX_LISTED_WAITERS).
local function wait(kind, owner)
  out[1] = out[1] + 1
  if out[3] < 100 then
    out[3] = out[3] + 1
    out[#out + 1], out[#out + 2] = kind, owner
  end
end

-- Calls `each(field, token, remaining ms, rest)` for the live entries of a
-- hash valued `1|<token>|<expiry in ms>|<rest>`.
local function entries(key, each)
  local all = redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    local token, expiry, rest = string.match(all[i + 1], '^1|(%d+)|(%d+)|?(.*)$')
    if token and tonumber(expiry) > now then
      each(all[i], token, tonumber(expiry) - now, rest)
    end
  end
end

local lease = redis.call('GET', KEYS[1])
if lease then
  local owner, token = string.match(lease, '^1|([^|]*)|(%d+)')
  if owner then add('x', owner, token, redis.call('PTTL', KEYS[1]), -1) end
  -- The waiter mark (see acquire.lua); 119 is `w`.
  if owner and string.byte(lease, -1) == 119 then out[2] = 1 end
end

-- The fair queue's waiters, in line: by their entry's seq.
local line = {}
entries(KEYS[2], function(owner, token, remaining, seq)
  if owner == '#' then return end
  if token == '0' then
    line[#line + 1] = {tonumber(seq), owner}
  else
    add('f', owner, token, remaining, -1)
  end
end)
table.sort(line, function(a, b) return a[1] < b[1] end)
for _, waiter in ipairs(line) do wait('f', waiter[2]) end

entries(KEYS[3], function(owner, token, remaining, rest)
  if owner == '~' then wait('w', rest); return end
  add(rest == 'w' and 'w' or 'r', owner, token, remaining, -1)
end)

for i, tag in ipairs({'p', 's'}) do
  local key = KEYS[3 + i]
  local number = string.match(redis.call('HGET', key, '#') or '', '^1|(%d+)$') or '0'
  entries(key, function(owner, token, remaining, segment)
    if owner == '#' then return end
    add(tag .. number, owner, token, remaining, tag == 's' and tonumber(segment) or -1)
  end)
end

for _, value in ipairs(holders) do out[#out + 1] = value end
return out
