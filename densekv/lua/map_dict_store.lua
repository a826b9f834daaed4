-- map_dict_store: store a trained zstd dictionary under its content id (codec.content_id).
-- The id is derived from the bytes, so storing again (a process re-storing what a restart
-- lost, two processes that trained the same bytes) is harmless; another dictionary under an
-- id already taken (a 1 in 134 million hash collision) is refused, never overwritten: values
-- name their dictionary by id.
-- KEYS[1]  the namespace's dictionary hash (field N = the bytes of dictionary N)
-- ARGV[1]  the dictionary's id   ARGV[2] its bytes
-- Reply:   the id (integer), or an error if that id holds other bytes
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur == false then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
elseif cur ~= ARGV[2] then
  return redis.error_reply('DENSEKV dictionary id ' .. ARGV[1] .. ' holds other bytes')
end
return tonumber(ARGV[1])
