-- ix_sweep: drop identity-index entries whose session's absolute expiry has surely passed.
-- KEYS[1]  an identity-index partition hash (fields: len + identity + session reference)
-- ARGV[1]  now (unix s)   ARGV[2] seconds per day   ARGV[3] the day numbers' origin (DAY0)
-- A value is a day number (format 0), or (formats 1 and 2: stores that limit sessions or
-- track devices, densekv/sessions/index.py) 0xD1 / 0xD2 and the exact absolute_at in
-- bytes 2-5.
-- Reply:   the number of entries removed
local all = redis.call('HGETALL', KEYS[1])
local now = tonumber(ARGV[1])
local today = math.floor(now / tonumber(ARGV[2])) - tonumber(ARGV[3])
local removed = 0
local function dead(v)
  local f = string.byte(v, 1)
  if (f == 0xD1 and #v >= 17) or (f == 0xD2 and #v >= 9) then
    local a, b, c, d = string.byte(v, 2, 5)
    return ((a * 256 + b) * 256 + c) * 256 + d <= now
  end
  return tonumber(v) <= today
end
for i = 1, #all, 2 do
  if dead(all[i + 1]) then
    redis.call('HDEL', KEYS[1], all[i])
    removed = removed + 1
  end
end
return removed
