-- map_incr_field: incr for a map in ttl_mode "field". HINCRBY keeps a field's TTL (Redis
-- 7.4, Valkey 9.1: checked by tests/behaviour/test_map_fieldttl.py); a new item gets the
-- map's default TTL. The server does the 64-bit arithmetic (Lua numbers are doubles), and
-- the result is read back as text, so it is exact.
-- KEYS[1]  the bucket hash
-- ARGV[1]  field   ARGV[2] delta   ARGV[3] expiry of a new item, unix ms ("0" = none)
-- Reply:   {1, new value as text} or {0, error text} (nothing changed then)
local new = redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0
local ok, res = pcall(redis.call, 'HINCRBY', KEYS[1], ARGV[1], ARGV[2])
if not ok then return {0, res.err or tostring(res)} end
if new and ARGV[3] ~= '0' then redis.call('HPEXPIREAT', KEYS[1], ARGV[3], 'FIELDS', 1, ARGV[1]) end
return {1, redis.call('HGET', KEYS[1], ARGV[1])}
