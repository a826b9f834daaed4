-- key_touch: roll the idle expiry of a key-per-session layout (json, packed, hash).
-- The key's own expiry is the session's expires_at; its value holds the absolute one.
-- KEYS[1]  the session key
-- ARGV[1]  now (unix s)   ARGV[2] idle ttl (s)
-- ARGV[3]  value kind: "json" (field x) | "msgpack" (map key x) | "hash" (hash field x)
--          msgpack values start with x as a uint32 (0x83 0xa1 'x' 0xce + 4 bytes): read in
--          place, since cmsgpack cannot parse every payload (bin, uint64)
-- Reply:   the new expires_at, or 0 if the session is missing or expired
local exp = redis.call('EXPIRETIME', KEYS[1])
local now = tonumber(ARGV[1])
if exp < 0 or exp <= now then return 0 end
local abs
if ARGV[3] == 'hash' then
  abs = tonumber(redis.call('HGET', KEYS[1], 'x'))
elseif ARGV[3] == 'json' then
  abs = cjson.decode(redis.call('GET', KEYS[1]))['x']
else
  local v = redis.call('GET', KEYS[1])
  if string.sub(v, 2, 4) == '\161x\206' and (string.byte(v, 1) == 0x82 or string.byte(v, 1) == 0x83) then
    local a, b, c, d = string.byte(v, 5, 8)
    abs = ((a * 256 + b) * 256 + c) * 256 + d
  else
    abs = cmsgpack.unpack(v)['x']
  end
end
local new = now + tonumber(ARGV[2])
if new > abs then new = abs end
if new <= exp then return exp end
redis.call('EXPIREAT', KEYS[1], new)
return new
