-- hrec_update: replace a live session's payload, keeping owner and expiry.
-- Record format: densekv/sessions/record.py.
-- KEYS[1]  the partition hash
-- ARGV[1]  field   ARGV[2] now (unix s)   ARGV[3] the new msgpack payload ("" for none)
-- ARGV[4]  the largest record the partition may hold (hash-max-listpack-value)
-- ARGV[5]  mode: "plain" | "zset" | "fieldttl" (re-apply the field TTL: HSET clears it)
-- Reply:   1 updated, 0 missing or expired, -1 too large (nothing written in both cases)
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if not rec then return 0 end
local a, b, c, d = string.byte(rec, 2, 5)
local exp = ((a * 256 + b) * 256 + c) * 256 + d
if exp <= tonumber(ARGV[2]) then return 0 end
local flags = string.byte(rec, 1)
local pos = 6
if math.floor(flags / 32) % 2 == 1 then pos = pos + 4 end
local len = flags % 16
if len == 15 then len = string.byte(rec, pos); pos = pos + 1 end
pos = pos + len
flags = flags % 64
if ARGV[3] ~= '' then flags = flags + 64 end
local new = string.char(flags) .. string.sub(rec, 2, pos - 1) .. ARGV[3]
if #new > tonumber(ARGV[4]) then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], new)
if ARGV[5] == 'fieldttl' then
  redis.call('HEXPIREAT', KEYS[1], exp, 'FIELDS', 1, ARGV[1])
end
return 1
