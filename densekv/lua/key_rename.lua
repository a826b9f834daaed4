-- key_rename: move a live key-per-session to a new key in one step (regeneration).
-- KEYS[1]  old key   KEYS[2] new key (same slot: the store picks a token in the group)
-- ARGV[1]  value kind: "string" | "hash"   ARGV[2] now (unix s)
-- Reply:   {value, expiretime} of the moved session (value = flat field list for a hash),
--          or false if the old session is missing or expired (nothing written)
local exp = redis.call('EXPIRETIME', KEYS[1])
if exp < 0 or exp <= tonumber(ARGV[2]) then return false end
redis.call('RENAME', KEYS[1], KEYS[2])
local value
if ARGV[1] == 'hash' then
  value = redis.call('HGETALL', KEYS[2])
else
  value = redis.call('GET', KEYS[2])
end
return {value, redis.call('EXPIRETIME', KEYS[2])}
