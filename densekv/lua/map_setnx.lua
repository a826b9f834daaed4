-- map_setnx: put an item only if no live item is there, in either ttl_mode of a map.
-- Value framing: densekv/codec.py (0x0E = expiry wrapper, 0x0F = out-of-line marker).
-- KEYS[1]  the bucket hash   KEYS[2] the item's out-of-line key
-- ARGV[1]  field   ARGV[2] what the bucket stores (framed value or marker, maybe wrapped)
-- ARGV[3]  the out-of-line value ("" when the value fits the bucket)
-- ARGV[6]  the map's ttl_mode: absent for "packed", "field" for "field"
-- packed:  an item whose expiry wrapper has passed counts as absent
--          ARGV[4] the out-of-line key's expiry, unix s ("0" = none)   ARGV[5] now (unix s)
-- field:   the server hides and removes expired fields itself; values carry no wrapper
--          ARGV[4] the field's expiry, unix ms ("0" = none)
--          ARGV[5] the out-of-line key's expiry, unix ms ("0" = none)
-- Reply:   1 written, 0 a live item was there (nothing written)
local field_ttl = ARGV[6] == 'field'
if field_ttl then
  if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
else
  local cur = redis.call('HGET', KEYS[1], ARGV[1])
  if cur then
    if string.byte(cur, 1) ~= 14 then return 0 end
    local a, b, c, d = string.byte(cur, 2, 5)
    if ((a * 256 + b) * 256 + c) * 256 + d > tonumber(ARGV[5]) then return 0 end
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local unit, at = 'EXAT', ARGV[4] -- the out-of-line key's expiry
if field_ttl then
  if ARGV[4] ~= '0' then redis.call('HPEXPIREAT', KEYS[1], ARGV[4], 'FIELDS', 1, ARGV[1]) end
  unit, at = 'PXAT', ARGV[5]
end
if ARGV[3] == '' then
  redis.call('DEL', KEYS[2])
elseif at ~= '0' then
  redis.call('SET', KEYS[2], ARGV[3], unit, at)
else
  redis.call('SET', KEYS[2], ARGV[3])
end
return 1
