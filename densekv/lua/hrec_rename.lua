-- hrec_rename: move a live session to a new field in one step (token regeneration).
-- The old field stops working and the new one works atomically; KEYS share one slot.
-- KEYS[1]  old partition hash   KEYS[2] new partition hash
-- KEYS[3]  old expiry zset      KEYS[4] new expiry zset   (mode "zset" only)
-- ARGV[1]  old field   ARGV[2] new field   ARGV[3] now (unix s)
-- ARGV[4]  mode: "plain" | "zset" | "fieldttl"
-- Reply:   the moved record, or false if the old session is missing or expired
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if not rec then return false end
local a, b, c, d = string.byte(rec, 2, 5)
local exp = ((a * 256 + b) * 256 + c) * 256 + d
if exp <= tonumber(ARGV[3]) then return false end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[2], rec)
if ARGV[4] == 'zset' then
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('ZADD', KEYS[4], exp, ARGV[2])
elseif ARGV[4] == 'fieldttl' then
  redis.call('HEXPIREAT', KEYS[2], exp, 'FIELDS', 1, ARGV[2])
end
return rec
