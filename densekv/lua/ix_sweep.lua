-- ix_sweep: drop identity-index entries whose session's absolute expiry has passed.
-- KEYS[1]  an identity-index partition hash (fields: len + identity + digest)
-- ARGV[1]  now (unix s)
-- Reply:   the number of entries removed
local all = redis.call('HGETALL', KEYS[1])
local now = tonumber(ARGV[1])
local removed = 0
for i = 1, #all, 2 do
  if tonumber(all[i + 1]) <= now then
    redis.call('HDEL', KEYS[1], all[i])
    removed = removed + 1
  end
end
return removed
