-- key_touch: roll the idle expiry of a key-per-session layout (json, packed, hash).
-- The key's own expiry is the session's expires_at; its value holds the absolute one.
-- KEYS[1]  the session key
-- ARGV[1]  now (unix s)   ARGV[2] idle ttl (s)
-- ARGV[3]  value kind: "json" (field x) | "msgpack" (map key x) | "hash" (hash field x)
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
  abs = cmsgpack.unpack(redis.call('GET', KEYS[1]))['x']
end
local new = now + tonumber(ARGV[2])
if new > abs then new = abs end
if new <= exp then return exp end
redis.call('EXPIREAT', KEYS[1], new)
return new
