-- map_setnx: put an item only if no live item is there (an expired one counts as absent).
-- Value framing: densekv/codec.py (0x0E = expiry wrapper, 0x0F = out-of-line marker).
-- KEYS[1]  the bucket hash   KEYS[2] the item's out-of-line key
-- ARGV[1]  field   ARGV[2] what the bucket stores (framed value or marker, maybe wrapped)
-- ARGV[3]  the out-of-line value ("" when the value fits the bucket)
-- ARGV[4]  expiry of the out-of-line key, unix s ("0" = none)   ARGV[5] now (unix s)
-- Reply:   1 written, 0 a live item was there (nothing written)
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then
  if string.byte(cur, 1) ~= 14 then return 0 end
  local a, b, c, d = string.byte(cur, 2, 5)
  if ((a * 256 + b) * 256 + c) * 256 + d > tonumber(ARGV[5]) then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] == '' then
  redis.call('DEL', KEYS[2])
elseif ARGV[4] ~= '0' then
  redis.call('SET', KEYS[2], ARGV[3], 'EXAT', ARGV[4])
else
  redis.call('SET', KEYS[2], ARGV[3])
end
return 1
