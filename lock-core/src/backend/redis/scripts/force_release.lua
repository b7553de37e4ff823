-- Removes every holder and queue entry of every kind of lock on one key, for an
-- operator breaking a wedged lock, and wakes the key's waiters: those on the
-- key's channel, and those with a queue entry on their own (a fair queue's
-- waiters, a waiting writer: `<channel>:<owner>`). The next token still
-- passes every removed one.
--
-- KEYS[1..5]  as inspect.lua; KEYS[6] the token record (see acquire.lua)
-- ARGV[1]     the release channel; ARGV[2] `PUBLISH`, or `SPUBLISH` on a
--             Redis Cluster (see release.lua)
--
-- Replies the number of holders and queue entries removed, and the highest
-- token among the holders (0 for none).
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local removed, highest, queued = 0, 0, {}

local function seen(token)
  token = tonumber(token)
  if token and token > highest then highest = token end
end

local lease = redis.call('GET', KEYS[1])
if lease then
  removed = removed + 1
  seen(string.match(lease, '^1|[^|]*|(%d+)'))
end
for i = 2, 5 do
  local all = redis.call('HGETALL', KEYS[i])
  for j = 1, #all, 2 do
    local field, value = all[j], all[j + 1]
    if field ~= '#' then
      removed = removed + 1
      local token = string.match(value, '^1|(%d+)|')
      seen(token)
      if i == 2 and token == '0' then queued[#queued + 1] = field end
      if i == 3 and field == '~' then
        queued[#queued + 1] = string.match(value, '^1|%d+|%d+|(.*)$')
      end
    end
  end
end
local removed_up_to = highest
local fence = redis.call('GET', KEYS[6])
if fence then seen(string.match(fence, '^1|(%d+)')) end
-- The highest token is recorded as a mint is (see acquire.lua): the next
-- token passes it also if the clock steps back.
local ours = not fence or string.match(fence, '^1|%d+$')
if highest > 0 and ours then
  redis.call('SET', KEYS[6], '1|' .. string.format('%.0f', highest), 'PX',
    math.max(math.floor((highest - now_us) / 1000), 0) + 10000)
end
if removed > 0 then
  redis.call(ARGV[2], ARGV[1], '1')
  for _, owner in ipairs(queued) do redis.call(ARGV[2], ARGV[1] .. ':' .. owner, '1') end
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
end
return {removed, string.format('%.0f', removed_up_to)}
