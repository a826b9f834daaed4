-- map_move: move one plain key into a compact map, atomically (hot migration, one server).
-- Moves only if the plain value is still what the migrator read; a live item already in
-- the map (written by the application since) wins and the plain key is just deleted.
-- KEYS[1]  the plain key   KEYS[2] the bucket hash   KEYS[3] the item's out-of-line key
-- ARGV[1]  field   ARGV[2] the plain value as read   ARGV[3] its framed map value
-- ARGV[4]  hash-max-listpack-value
-- Reply:   1 moved, 2 map had it (plain key deleted), 0 plain key gone, -1 value changed
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
if v ~= ARGV[2] then return -1 end
local now = tonumber(redis.call('TIME')[1])
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if cur then
  local alive = true
  if string.byte(cur, 1) == 14 then
    local a, b, c, d = string.byte(cur, 2, 5)
    alive = ((a * 256 + b) * 256 + c) * 256 + d > now
  end
  if alive then
    redis.call('DEL', KEYS[1])
    return 2
  end
end
local ttl = redis.call('TTL', KEYS[1])
local head = ''
local exp = 0
if ttl > 0 then
  exp = now + ttl
  head = string.char(14, math.floor(exp / 16777216) % 256, math.floor(exp / 65536) % 256,
                     math.floor(exp / 256) % 256, exp % 256)
end
local framed = ARGV[3]
if #head + #framed > tonumber(ARGV[4]) then
  redis.call('SET', KEYS[3], framed)
  if exp > 0 then redis.call('EXPIREAT', KEYS[3], exp + 1) end
  framed = string.char(15)
else
  redis.call('DEL', KEYS[3])
end
redis.call('HSET', KEYS[2], ARGV[1], head .. framed)
redis.call('DEL', KEYS[1])
return 1
