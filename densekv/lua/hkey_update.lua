-- hkey_update: set or clear the payload field "d" of a live hash-per-session.
-- KEYS[1]  the session hash
-- ARGV[1]  the msgpack payload, or "" to clear it   ARGV[2] now (unix s)
-- ARGV[3]  compare-and-set: "any" (write unconditionally) | "none" (only if there is no
--          "d" field now) | "is" (only if "d" holds ARGV[4] now)
-- ARGV[5]  optional, with ARGV[6] (set_ttl): the new expires_at (the key's EXPIREAT) and
--          absolute_at (field "x"), unix s; "" or absent: both stay
-- Reply:   1 updated, 0 the session is missing or expired, -2 "d" changed since the
--          caller read it (nothing written in the last two cases)
local exp = redis.call('EXPIRETIME', KEYS[1])
if exp < 0 or exp <= tonumber(ARGV[2]) then return 0 end
if ARGV[3] ~= 'any' then
  local cur = redis.call('HGET', KEYS[1], 'd')
  if ARGV[3] == 'none' and cur then return -2 end
  if ARGV[3] == 'is' and cur ~= ARGV[4] then return -2 end
end
if ARGV[1] == '' then
  redis.call('HDEL', KEYS[1], 'd')
else
  redis.call('HSET', KEYS[1], 'd', ARGV[1])
end
if ARGV[5] and ARGV[5] ~= '' then
  redis.call('HSET', KEYS[1], 'x', ARGV[6])
  redis.call('EXPIREAT', KEYS[1], ARGV[5])
end
return 1
