-- key_touch: roll the idle expiry of a key-per-session layout (json, packed, hash).
-- The key's own expiry is the session's expires_at; its value holds the absolute one.
-- KEYS[1]  the session key
-- ARGV[1]  now (unix s)   ARGV[2] idle ttl (s)
-- ARGV[3]  value kind: "json" (field x) | "msgpack" (map key x) | "hash" (hash field x)
--          json values start with {"x":<digits>: read in place (cjson.decode of the whole
--          value was 15-25% of the script's server time, benchmarks/lua_scripts.py), else
--          decoded. The in-place read trusts the value is one densekv wrote (layouts/
--          perkey.py: compact JSON, x first, once): on a value it did not write, such as one
--          with x twice, it may take another x than cjson would
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
  local v = redis.call('GET', KEYS[1])
  abs = tonumber(string.match(v, '^{"x":(%d+)[,}]')) or cjson.decode(v)['x']
else
  local v = redis.call('GET', KEYS[1])
  local m, k1, k2, k3, a, b, c, d = string.byte(v, 1, 8)
  if k1 == 161 and k2 == 120 and k3 == 206 and (m == 0x82 or m == 0x83) then
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
