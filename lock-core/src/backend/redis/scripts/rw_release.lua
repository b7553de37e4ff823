-- Ends a read or write lease, or withdraws a waiting writer's mark, and
-- tells the waiters that may now go on, and only them:
-- - while a writer's mark stands, only that writer, on its own channel
--   (`<channel>:<owner>`), once the last holder is gone;
-- - else, on the key's channel: everyone when a writer leaves, a writer
--   when the last reader leaves, the readers when a mark is withdrawn and
--   no writer holds.
--
-- KEYS[1]  the holders (see rw_acquire.lua)
-- ARGV[1]  the owner value; ARGV[2] the release channel
-- ARGV[3]  `PUBLISH`, or `SPUBLISH` on a Redis Cluster (see release.lua)
--
-- Replies 1 if a live lease or mark was ended, 0 if the owner had none
-- (an expired one is removed), or `format:<version>` for a value of
-- another format.
local holders, owner, channel, publish = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local all = redis.call('HGETALL', holders)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local field, value, marked_by, others, writer_holds = nil, nil, nil, 0, false
for i = 1, #all, 2 do
  local f, v = all[i], all[i + 1]
  -- 49 is `1`, 124 is `|`.
  if string.byte(v, 1) ~= 49 or string.byte(v, 2) ~= 124 then
    return 'format:' .. (string.match(v, '^(%d+)|') or '0')
  end
  local expiry, rest = string.match(v, '^1|%d+|(%d+)|(.*)$')
  local live = tonumber(expiry) > now
  if f == owner then
    field, value = f, v
  elseif f == '~' then
    if rest == owner then
      field, value = f, v
    elseif live then
      marked_by = rest
    end
  elseif live then
    others = others + 1
    if rest == 'w' then writer_holds = true end
  end
end
if not field then return 0 end
local expiry, rest = string.match(value, '^1|%d+|(%d+)|(.*)$')
local live = tonumber(expiry) > now
-- Published first, so that a denied PUBLISH (ACL) fails the release whole.
if live then
  if field == '~' then
    if not writer_holds then redis.call(publish, channel, '1') end
  elseif marked_by then
    if others == 0 then redis.call(publish, channel .. ':' .. marked_by, '1') end
  elseif rest == 'w' or others == 0 then
    redis.call(publish, channel, '1')
  end
end
redis.call('HDEL', holders, field)
if live then return 1 end
return 0
