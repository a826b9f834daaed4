-- hrec_rename: move a live session to a new field in one step (token regeneration, and
-- login: the same move with a new identity). The old field stops working and the new one
-- works atomically; a continuation (the continuation field in the same hash, or the entry
-- of the separate continuation hash) or out-of-line payload moves with it. KEYS share one
-- slot.
-- Record format: densekv/sessions/record.py.
-- KEYS[1]  old partition hash   KEYS[2] new partition hash
-- KEYS[3]  old out-of-line key  KEYS[4] new out-of-line key
-- KEYS[5]  old continuation hash KEYS[6] new continuation hash
-- KEYS[7]  old expiry zset      KEYS[8] new expiry zset   (mode "zset" only)
-- ARGV[1]  old field   ARGV[2] new field   ARGV[3] now (unix s)
-- ARGV[4]  mode: "plain" | "zset" | "fieldttl"
-- ARGV[5]  "" to keep the identity, or the new one: one byte of flag bits 0-4, then the
--          identity section (length byte if escaped, identity bytes)
-- ARGV[6]  the old field's continuation field   ARGV[7] the new field's (partitioned.py
--          cont_field)
-- Reply:   the moved record, or false if the old session is missing or expired
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if not rec then return false end
local a, b, c, d = string.byte(rec, 2, 5)
local exp = ((a * 256 + b) * 256 + c) * 256 + d
if exp <= tonumber(ARGV[3]) then return false end
if ARGV[5] ~= '' then
  local flags = string.byte(rec, 1)
  local head_end = 5
  if math.floor(flags / 32) % 2 == 1 then head_end = 9 end
  local sec = flags % 16
  if sec == 15 then sec = 1 + string.byte(rec, head_end + 1) end
  rec = string.char(flags - flags % 32 + string.byte(ARGV[5], 1)) .. string.sub(rec, 2, head_end)
        .. string.sub(ARGV[5], 2) .. string.sub(rec, head_end + sec + 1)
end
-- the payload's marker (record.py: after the header and identity) says where its rest is
local f = string.byte(rec, 1)
local tail
if f >= 128 then
  local pos = 6
  if f % 64 >= 32 then pos = 10 end
  local len = f % 16
  if len == 15 then len = string.byte(rec, pos); pos = pos + 1 end
  tail = string.byte(rec, pos + len)
end
if tail == 12 then
  local cont = redis.call('HGET', KEYS[1], ARGV[6])
  redis.call('HDEL', KEYS[1], ARGV[1], ARGV[6])
  if cont then
    redis.call('HSET', KEYS[2], ARGV[2], rec, ARGV[7], cont)
  else
    redis.call('HSET', KEYS[2], ARGV[2], rec)
  end
else
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('HSET', KEYS[2], ARGV[2], rec)
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('RENAME', KEYS[3], KEYS[4])
end
local rest = redis.call('HGET', KEYS[5], ARGV[1])
if rest then
  redis.call('HDEL', KEYS[5], ARGV[1])
  redis.call('HSET', KEYS[6], ARGV[2], rest)
end
if ARGV[4] == 'zset' then
  redis.call('ZREM', KEYS[7], ARGV[1])
  redis.call('ZADD', KEYS[8], exp, ARGV[2])
elseif ARGV[4] == 'fieldttl' then
  redis.call('HEXPIREAT', KEYS[2], exp, 'FIELDS', 1, ARGV[2])
end
return rec
