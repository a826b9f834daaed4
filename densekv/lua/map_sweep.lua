-- map_sweep: remove a bucket's expired items (and their out-of-line keys), atomically.
-- An item whose expiry is in the future is never touched.
-- KEYS[1]  the bucket hash
-- ARGV[1]  now (unix s)   ARGV[2] the out-of-line key prefix of this bucket (prefix .. field)
-- Reply:   number of items removed
local now = tonumber(ARGV[1])
local all = redis.call('HGETALL', KEYS[1])
local removed = 0
for i = 1, #all, 2 do
  local v = all[i + 1]
  if string.byte(v, 1) == 14 then
    local a, b, c, d = string.byte(v, 2, 5)
    if ((a * 256 + b) * 256 + c) * 256 + d <= now then
      redis.call('HDEL', KEYS[1], all[i])
      if string.byte(v, 6) == 15 then redis.call('DEL', ARGV[2] .. all[i]) end
      removed = removed + 1
    end
  end
end
return removed
