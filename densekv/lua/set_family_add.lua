-- set_family_add: add one child to a parent's small set; refresh the parent's expiry.
-- KEYS[1]  the parent's key (a HASH child -> 1, or a SET of children)
-- ARGV[1]  the child   ARGV[2] "hash" or "set"   ARGV[3] expiry in ms (0: keep as is)
-- Reply:   {added (1 new / 0 already there), children now, encoding of the key}
--          or a WRONGTYPE error if the key holds another type (nothing written)
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'none' and t ~= ARGV[2] then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local added, n
if ARGV[2] == 'hash' then
  added = redis.call('HSETNX', KEYS[1], ARGV[1], 1)
  n = redis.call('HLEN', KEYS[1])
else
  added = redis.call('SADD', KEYS[1], ARGV[1])
  n = redis.call('SCARD', KEYS[1])
end
if tonumber(ARGV[3]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return {added, n, redis.call('OBJECT', 'ENCODING', KEYS[1])}
