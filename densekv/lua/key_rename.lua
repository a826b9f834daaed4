-- key_rename: move a live key-per-session to a new key in one step (regeneration; login
-- also changes the identity in the same step).
-- KEYS[1]  old key   KEYS[2] new key (same slot: the store picks a token in the group)
-- ARGV[1]  value kind: "string" | "hash"   ARGV[2] now (unix s)
-- ARGV[3]  "" to keep the value, or (login) for a string: the value as the caller read it,
--          for a hash: the new identity field "i"
-- ARGV[4]  (login, string only) the new value, written only if the old one is ARGV[3]
-- Reply:   {value, expiretime} of the moved session (value = flat field list for a hash),
--          false if the old session is missing or expired, -2 if a string changed since
--          the caller read it (nothing written in the last two cases)
local exp = redis.call('EXPIRETIME', KEYS[1])
if exp < 0 or exp <= tonumber(ARGV[2]) then return false end
if ARGV[3] ~= '' and ARGV[1] == 'string' then
  if redis.call('GET', KEYS[1]) ~= ARGV[3] then return -2 end
  redis.call('SET', KEYS[1], ARGV[4], 'KEEPTTL')
end
redis.call('RENAME', KEYS[1], KEYS[2])
local value
if ARGV[1] == 'hash' then
  if ARGV[3] ~= '' then redis.call('HSET', KEYS[2], 'i', ARGV[3]) end
  value = redis.call('HGETALL', KEYS[2])
else
  value = redis.call('GET', KEYS[2])
end
return {value, redis.call('EXPIRETIME', KEYS[2])}
