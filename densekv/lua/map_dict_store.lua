-- map_dict_store: store a trained zstd dictionary under a new id (or the id it already has).
-- Ids count up from 1 and are never reused, so a value naming dictionary N always means
-- these exact bytes.
-- KEYS[1]  the namespace's dictionary hash (field "next" = last id given; field N = bytes)
-- ARGV[1]  the dictionary bytes
-- Reply:   the dictionary's id (integer)
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if all[i] ~= 'next' and all[i + 1] == ARGV[1] then return tonumber(all[i]) end
end
local id = redis.call('HINCRBY', KEYS[1], 'next', 1)
redis.call('HSET', KEYS[1], tostring(id), ARGV[1])
return id
