-- map_move_field: map_move for a map in ttl_mode "field": move one plain key into the map
-- atomically, its TTL becoming the field's TTL (to the millisecond, from PEXPIRETIME).
-- Moves only if the plain value is still what the migrator read; an item already in the
-- map (written by the application since) wins and the plain key is just deleted.
-- KEYS[1]  the plain key   KEYS[2] the bucket hash   KEYS[3] the item's out-of-line key
-- ARGV[1]  field   ARGV[2] the plain value as read   ARGV[3] its framed map value
-- ARGV[4]  hash-max-listpack-value
-- Reply:   1 moved, 2 map had it (plain key deleted), 0 plain key gone, -1 value changed
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
if v ~= ARGV[2] then return -1 end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
  redis.call('DEL', KEYS[1])
  return 2
end
local pexp = redis.call('PEXPIRETIME', KEYS[1])
local at = string.format('%.0f', pexp)
local framed = ARGV[3]
if #framed > tonumber(ARGV[4]) then
  redis.call('SET', KEYS[3], framed)
  if pexp > 0 then redis.call('PEXPIREAT', KEYS[3], string.format('%.0f', pexp + 1000)) end
  framed = string.char(15)
else
  redis.call('DEL', KEYS[3])
end
redis.call('HSET', KEYS[2], ARGV[1], framed)
if pexp > 0 then redis.call('HPEXPIREAT', KEYS[2], at, 'FIELDS', 1, ARGV[1]) end
redis.call('DEL', KEYS[1])
return 1
