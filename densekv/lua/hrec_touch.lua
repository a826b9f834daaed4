-- hrec_touch: roll a session's idle expiry forward, never past its absolute expiry.
-- Record format: densekv/sessions/record.py (byte 1 flags, bytes 2-5 expires_at u32 BE,
-- bytes 6-9 absolute_at when flag bit 5 is set).
-- KEYS[1]  the partition hash            KEYS[2]  its expiry zset (mode "zset" only)
-- ARGV[1]  field   ARGV[2] now (unix s)   ARGV[3] idle ttl (s)
-- ARGV[4]  mode: "plain" | "zset" (update the zset score) | "fieldttl" (HEXPIREAT the field)
-- Reply:   the new expires_at, or 0 if the session is missing or expired (nothing written)
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if not rec then return 0 end
local function u32(s, i)
  local a, b, c, d = string.byte(s, i, i + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end
local function be32(n)
  return string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256,
                     math.floor(n / 256) % 256, n % 256)
end
local now = tonumber(ARGV[2])
local exp = u32(rec, 2)
if exp <= now then return 0 end
local flags = string.byte(rec, 1)
local abs = exp
if math.floor(flags / 32) % 2 == 1 then abs = u32(rec, 6) end
local new = now + tonumber(ARGV[3])
if new > abs then new = abs end
if new <= exp then return exp end
redis.call('HSET', KEYS[1], ARGV[1], string.sub(rec, 1, 1) .. be32(new) .. string.sub(rec, 6))
if ARGV[4] == 'zset' then
  redis.call('ZADD', KEYS[2], new, ARGV[1])
elseif ARGV[4] == 'fieldttl' then
  redis.call('HEXPIREAT', KEYS[1], new, 'FIELDS', 1, ARGV[1])
end
return new
