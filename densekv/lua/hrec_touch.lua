-- hrec_touch: roll a session's idle expiry forward, never past its absolute expiry.
-- Record format: densekv/sessions/record.py (byte 1 flags, bytes 2-5 expires_at u32 BE,
-- bytes 6-9 absolute_at when flag bit 5 is set).
-- KEYS[1]  the partition hash            KEYS[2]  its expiry zset (mode "zset" only)
-- ARGV[1]  field   ARGV[2] now (unix s)   ARGV[3] idle ttl (s)
-- ARGV[4]  mode: "plain" | "zset" (update the zset score) | "fieldttl" (HEXPIREAT the field)
-- Reply:   the new expires_at, or 0 if the session is missing or expired (nothing written)
-- Kept to one HGET and one HSET with the byte arithmetic inline: no helper closures, no
-- math.floor (integer division by subtraction), one string.byte for the flags and
-- expires_at, the new record in one concatenation. The script call and its two redis.calls
-- are most of its server time (benchmarks/lua_scripts.py: its floor rows).
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if not rec then return 0 end
local now = tonumber(ARGV[2])
local flags, a, b, c, d = string.byte(rec, 1, 5)
local exp = ((a * 256 + b) * 256 + c) * 256 + d
if exp <= now then return 0 end
local abs = exp -- absolute_at: bytes 6-9 if flag bit 5, else expires_at itself
if flags % 64 >= 32 then
  a, b, c, d = string.byte(rec, 6, 9)
  abs = ((a * 256 + b) * 256 + c) * 256 + d
end
local new = now + tonumber(ARGV[3])
if new > abs then new = abs end
if new <= exp then return exp end
d = new % 256
local x = (new - d) / 256
c = x % 256
x = (x - c) / 256
b = x % 256
a = (x - b) / 256 % 256
redis.call('HSET', KEYS[1], ARGV[1], string.char(flags, a, b, c, d) .. string.sub(rec, 6))
if ARGV[4] == 'zset' then
  redis.call('ZADD', KEYS[2], new, ARGV[1])
elseif ARGV[4] == 'fieldttl' then
  redis.call('HEXPIREAT', KEYS[1], new, 'FIELDS', 1, ARGV[1])
end
return new
