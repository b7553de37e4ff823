-- Takes, renews and gives back many leases in one call, in order, each as
-- acquire.lua, renew.lua or release.lua would, with the same replies, one
-- per operation.
--
-- KEYS     the lease and the token record of each operation in turn
-- ARGV     three per operation: `a` (acquire), `n` (renew) or `r`
--          (release), the owner value, then the ttl in ms (acquire, renew)
--          or the release channel (release)
--
-- TIME is read once per call, by the first operation that needs it; a
-- token record keeps tokens of one key rising within a call. A value of
-- another format is left alone, and its operation answered
-- `format:<version>` (the others go on).
local t, clock
local out = {}
for i = 1, #KEYS / 2 do
  local lease, fence = KEYS[2 * i - 1], KEYS[2 * i]
  local owner, extra = ARGV[3 * i - 1], ARGV[3 * i]
  local n = #owner
  local r
  if ARGV[3 * i - 2] == 'a' then
    local found = redis.call('MGET', lease, fence)
    local holder, last = found[1], found[2]
    -- 49 is `1`, 124 is `|`.
    local other = (holder and (string.byte(holder, 1) ~= 49 or string.byte(holder, 2) ~= 124) and holder)
      or (last and (string.byte(last, 1) ~= 49 or string.byte(last, 2) ~= 124) and last)
    if other then r = 'format:' .. (string.match(other, '^(%d+)|') or '0') end
    if r then
      -- Another format: left alone.
    elseif holder then
      if string.byte(holder, n + 3) == 124 and string.sub(holder, 3, n + 2) == owner then
        redis.call('PEXPIRE', lease, extra)
        r = string.match(holder, '^%d+', n + 4)
      else
        if string.byte(holder, -1) ~= 119 then redis.call('APPEND', lease, '|w') end
        r = -1 - redis.call('PTTL', lease)
      end
    else
      if not clock then
        if not t then t = redis.call('TIME') end
        clock = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
      end
      local token, lead = clock, 0
      if last then
        local at = tonumber(clock)
        local next = math.max(at, tonumber(string.sub(last, 3)) + 1)
        token = string.format('%.0f', next)
        lead = math.floor((next - at) / 1000)
      end
      redis.call('SET', fence, '1|' .. token, 'PX', lead + 10000)
      redis.call('SET', lease, '1|' .. owner .. '|' .. token, 'PX', extra)
      r = token
    end
  elseif ARGV[3 * i - 2] == 'n' then
    local holder = redis.call('GET', lease)
    if holder and (string.byte(holder, 1) ~= 49 or string.byte(holder, 2) ~= 124) then
      r = 'format:' .. (string.match(holder, '^(%d+)|') or '0')
    elseif not (holder and string.byte(holder, n + 3) == 124 and string.sub(holder, 3, n + 2) == owner) then
      r = 0
    else
      redis.call('PEXPIRE', lease, extra)
      r = 1
    end
  else
    local holder = redis.call('GET', lease)
    if holder and (string.byte(holder, 1) ~= 49 or string.byte(holder, 2) ~= 124) then
      r = 'format:' .. (string.match(holder, '^(%d+)|') or '0')
    elseif not (holder and string.byte(holder, n + 3) == 124 and string.sub(holder, 3, n + 2) == owner) then
      r = 0
    else
      if string.byte(holder, -1) == 119 then redis.call('PUBLISH', extra, '1') end
      redis.call('DEL', lease)
      r = 1
    end
  end
  out[i] = r
end
return out
