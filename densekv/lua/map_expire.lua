-- map_expire: set (or remove) a live item's expiry. If the 5-byte expiry wrapper would push
-- the value past hash-max-listpack-value, the value moves to its out-of-line key instead
-- of turning the bucket into a hashtable.
-- KEYS[1]  the bucket hash   KEYS[2] the item's out-of-line key
-- ARGV[1]  field   ARGV[2] new expiry, unix s ("0" = persist)   ARGV[3] now (unix s)
-- ARGV[4]  hash-max-listpack-value
-- Reply:   1 done, 0 no live item
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return 0 end
if string.byte(cur, 1) == 14 then
  local a, b, c, d = string.byte(cur, 2, 5)
  if ((a * 256 + b) * 256 + c) * 256 + d <= tonumber(ARGV[3]) then return 0 end
  cur = string.sub(cur, 6)
end
local exp = tonumber(ARGV[2])
local head = ''
if exp > 0 then
  head = string.char(14, math.floor(exp / 16777216) % 256, math.floor(exp / 65536) % 256,
                     math.floor(exp / 256) % 256, exp % 256)
end
if cur ~= string.char(15) and #head + #cur > tonumber(ARGV[4]) then
  redis.call('SET', KEYS[2], cur)
  cur = string.char(15)
end
if cur == string.char(15) then
  if exp > 0 then redis.call('EXPIREAT', KEYS[2], exp + 1) else redis.call('PERSIST', KEYS[2]) end
end
redis.call('HSET', KEYS[1], ARGV[1], head .. cur)
return 1
