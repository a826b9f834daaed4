-- map_unmove: move one map item back to a plain key (the reverse migration), atomically.
-- KEYS[1]  the bucket hash   KEYS[2] the item's out-of-line key   KEYS[3] the plain key
-- ARGV[1]  field   ARGV[2] the bucket value as read   ARGV[3] the plain value to write
-- ARGV[4]  the plain key's expiry: unix s ("0" = none); or, for a map in ttl_mode
--          "field", "field": the field's TTL becomes the key's (to the millisecond)
-- Reply:   1 moved, 0 the item changed or vanished (nothing written)
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
local unit, at = 'EXAT', ARGV[4]
if at == 'field' then
  local pexp = redis.call('HPEXPIRETIME', KEYS[1], 'FIELDS', 1, ARGV[1])[1]
  unit, at = 'PXAT', '0'
  if pexp > 0 then at = string.format('%.0f', pexp) end
end
if at ~= '0' then
  redis.call('SET', KEYS[3], ARGV[3], unit, at)
else
  redis.call('SET', KEYS[3], ARGV[3])
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
return 1
