-- map_setnx_field: setnx for a map in ttl_mode "field": put an item only if its field is
-- absent (the server hides and removes expired fields itself), with the value and its field
-- TTL set together. Values carry no expiry wrapper in this mode (compact.py).
-- KEYS[1]  the bucket hash   KEYS[2] the item's out-of-line key
-- ARGV[1]  field   ARGV[2] what the bucket stores (framed value or the 0x0F marker)
-- ARGV[3]  the out-of-line value ("" when the value fits the bucket)
-- ARGV[4]  the field's expiry, unix ms ("0" = none)
-- ARGV[5]  the out-of-line key's expiry, unix ms ("0" = none)
-- Reply:   1 written, 0 an item was there (nothing written)
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[4] ~= '0' then redis.call('HPEXPIREAT', KEYS[1], ARGV[4], 'FIELDS', 1, ARGV[1]) end
if ARGV[3] == '' then
  redis.call('DEL', KEYS[2])
elseif ARGV[5] ~= '0' then
  redis.call('SET', KEYS[2], ARGV[3], 'PXAT', ARGV[5])
else
  redis.call('SET', KEYS[2], ARGV[3])
end
return 1
