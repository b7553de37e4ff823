-- Ends a read or write lease, or withdraws a waiting writer's mark, and
-- tells the waiters when one of them may now go on: on a writer's leave,
-- the last reader's, or a mark's withdrawal while no writer holds.
--
-- KEYS[1]  the holders (see rw_acquire.lua)
-- ARGV[1]  the owner value; ARGV[2] the release channel
--
-- Replies 1 if a live lease or mark was ended, 0 if the owner had none
-- (an expired one is removed), or `format:<version>` for a value of
-- another format.
local holders, owner, channel = KEYS[1], ARGV[1], ARGV[2]
local field = owner
local value = redis.call('HGET', holders, owner)
if not value then
  local mark = redis.call('HGET', holders, '~')
  -- 124 is `|`: the mark ends with `|<owner>`.
  if not mark or string.sub(mark, -#owner - 1) ~= '|' .. owner then return 0 end
  field, value = '~', mark
end
-- 49 is `1`, 124 is `|`.
if string.byte(value, 1) ~= 49 or string.byte(value, 2) ~= 124 then
  return 'format:' .. (string.match(value, '^(%d+)|') or '0')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry, rest = string.match(value, '^1|%d+|(%d+)|(.*)$')
local live = tonumber(expiry) > now
local wakes = live and rest == 'w'
if live and not wakes then
  -- A reader: wakes a writer if it was the last one. A mark: wakes
  -- readers unless a writer holds.
  wakes = true
  local all = redis.call('HGETALL', holders)
  for i = 1, #all, 2 do
    local other_expiry, other = string.match(all[i + 1], '^1|%d+|(%d+)|(.*)$')
    if all[i] ~= field and all[i] ~= '~' and tonumber(other_expiry or 0) > now
        and (field ~= '~' or other == 'w') then
      wakes = false
    end
  end
end
-- Published first, so that a denied PUBLISH (ACL) fails the release whole.
if wakes then redis.call('PUBLISH', channel, '1') end
redis.call('HDEL', holders, field)
if live then return 1 end
return 0
