-- set_family_discard: delete a parent's set, but only if it is one of ours.
-- KEYS[1]  the parent's key
-- ARGV[1]  "hash" or "set" (the type the family keeps)
-- Reply:   1 deleted, 0 no such parent; a WRONGTYPE error if the key holds another type
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then return 0 end
if t ~= ARGV[1] then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
return redis.call('UNLINK', KEYS[1])
