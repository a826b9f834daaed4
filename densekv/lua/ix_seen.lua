-- ix_seen: a session's new expiries in its identity-index entry of format 1 (a touch of a
-- store that limits sessions per identity, set_ttl of one that tracks devices or limits):
-- bytes 2-9 rewritten, the rest (created_at, line, label) kept; of format 2 (devices, no
-- limit): bytes 2-5, its absolute_at (it keeps no other expiry). An entry of format 0 is
-- written whole from ARGV[3]. A missing entry stays missing: the session was ended (logged
-- out, evicted, rotated away) since the caller read it, and an entry written now would be a
-- line of a session that is gone, which the limit would count as live until it idles out.
-- KEYS[1]  an identity-index partition hash
-- ARGV[1]  the entry's field   ARGV[2] absolute_at .. expires_at (8 bytes)
-- ARGV[3]  the whole value to write over a format-0 entry
-- Reply:   1 written, 0 no entry
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then
  return 0
end
if #v >= 17 and string.byte(v, 1) == 0xD1 then
  redis.call('HSET', KEYS[1], ARGV[1], string.sub(v, 1, 1) .. ARGV[2] .. string.sub(v, 10))
elseif #v >= 9 and string.byte(v, 1) == 0xD2 then
  redis.call('HSET', KEYS[1], ARGV[1], string.sub(v, 1, 1) .. string.sub(ARGV[2], 1, 4) .. string.sub(v, 6))
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
end
return 1
