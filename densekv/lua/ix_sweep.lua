-- ix_sweep: drop identity-index entries whose session's absolute expiry has surely passed.
-- KEYS[1]  an identity-index partition hash (fields: len + identity + session reference)
-- ARGV[1]  now (unix s)   ARGV[2] seconds per day   ARGV[3] the day numbers' origin (DAY0)
-- Reply:   the number of entries removed
local all = redis.call('HGETALL', KEYS[1])
local today = math.floor(tonumber(ARGV[1]) / tonumber(ARGV[2])) - tonumber(ARGV[3])
local removed = 0
for i = 1, #all, 2 do
  if tonumber(all[i + 1]) <= today then
    redis.call('HDEL', KEYS[1], all[i])
    removed = removed + 1
  end
end
return removed
