-- map_unmove_field: map_unmove for a map in ttl_mode "field": move one item back to a
-- plain key, atomically, the field's TTL becoming the key's (to the millisecond).
-- KEYS[1]  the bucket hash   KEYS[2] the item's out-of-line key   KEYS[3] the plain key
-- ARGV[1]  field   ARGV[2] the bucket value as read   ARGV[3] the plain value to write
-- Reply:   1 moved, 0 the item changed or vanished (nothing written)
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
local pexp = redis.call('HPEXPIRETIME', KEYS[1], 'FIELDS', 1, ARGV[1])[1]
if pexp > 0 then
  redis.call('SET', KEYS[3], ARGV[3], 'PXAT', string.format('%.0f', pexp))
else
  redis.call('SET', KEYS[3], ARGV[3])
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
return 1
