-- hkey_update: set or clear the payload field "d" of a live hash-per-session.
-- KEYS[1]  the session hash
-- ARGV[1]  the msgpack payload, or "" to clear it   ARGV[2] now (unix s)
-- Reply:   1 updated, 0 the session is missing or expired (nothing written)
local exp = redis.call('EXPIRETIME', KEYS[1])
if exp < 0 or exp <= tonumber(ARGV[2]) then return 0 end
if ARGV[1] == '' then
  redis.call('HDEL', KEYS[1], 'd')
else
  redis.call('HSET', KEYS[1], 'd', ARGV[1])
end
return 1
