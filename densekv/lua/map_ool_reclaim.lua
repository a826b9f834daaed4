-- map_ool_reclaim: delete an out-of-line key that its bucket no longer points to (left by a
-- small value written over a large one with a plain HSET).
-- KEYS[1]  the bucket hash   KEYS[2] the out-of-line key
-- ARGV[1]  field
-- Reply:   1 deleted, 0 still in use
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then
  if string.byte(cur, 1) == 14 then cur = string.sub(cur, 6) end
  if cur == string.char(15) then return 0 end
end
redis.call('DEL', KEYS[2])
return 1
