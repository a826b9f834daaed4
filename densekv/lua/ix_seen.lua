-- ix_seen: a session's new expiries in its identity-index entry of format 1 (a touch of a
-- store that limits sessions per identity, set_ttl of one that tracks devices or limits):
-- bytes 2-9 rewritten, the rest (created_at, line, label) kept. An entry that is missing,
-- or of format 0, is written whole from ARGV[3] (destroy_all must find every live session).
-- KEYS[1]  an identity-index partition hash
-- ARGV[1]  the entry's field   ARGV[2] absolute_at .. expires_at (8 bytes)
-- ARGV[3]  the whole value to write when there is no format-1 entry
-- Reply:   1
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v and #v >= 17 and string.byte(v, 1) == 0xD1 then
  redis.call('HSET', KEYS[1], ARGV[1], string.sub(v, 1, 1) .. ARGV[2] .. string.sub(v, 10))
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
end
return 1
