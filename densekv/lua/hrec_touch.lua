-- hrec_touch: roll a session's idle expiry forward, never past its absolute expiry.
-- Record format: densekv/sessions/record.py (byte 1 flags, bytes 2-5 expires_at u32 BE,
-- bytes 6-9 absolute_at when flag bit 5 is set).
-- KEYS[1]  the partition hash            KEYS[2]  its expiry zset (mode "zset" only)
-- ARGV[1]  field   ARGV[2] now (unix s)   ARGV[3] idle ttl (s)
-- ARGV[4]  mode: "plain" | "zset" (update the zset score) | "fieldttl" (HEXPIREAT the field)
-- Reply:   the new expires_at, or 0 if the session is missing or expired (nothing written)
-- Kept to one HGET and one HSET with the byte arithmetic inline (no helper closures made
-- per call): the two listpack lookups are most of its server time (benchmarks/hot_path.py).
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if not rec then return 0 end
local now = tonumber(ARGV[2])
local a, b, c, d = string.byte(rec, 2, 5)
local exp = ((a * 256 + b) * 256 + c) * 256 + d
if exp <= now then return 0 end
local abs = exp
if string.byte(rec, 1) % 64 >= 32 then
  a, b, c, d = string.byte(rec, 6, 9)
  abs = ((a * 256 + b) * 256 + c) * 256 + d
end
local new = now + tonumber(ARGV[3])
if new > abs then new = abs end
if new <= exp then return exp end
redis.call('HSET', KEYS[1], ARGV[1], string.sub(rec, 1, 1) .. string.char(math.floor(new / 16777216) % 256,
  math.floor(new / 65536) % 256, math.floor(new / 256) % 256, new % 256) .. string.sub(rec, 6))
if ARGV[4] == 'zset' then
  redis.call('ZADD', KEYS[2], new, ARGV[1])
elseif ARGV[4] == 'fieldttl' then
  redis.call('HEXPIREAT', KEYS[1], new, 'FIELDS', 1, ARGV[1])
end
return new
