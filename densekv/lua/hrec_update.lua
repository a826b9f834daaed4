-- hrec_update: replace a live session's payload, keeping owner and expiry. The payload
-- goes inline if the record fits hash-max-listpack-value, else split over the record and
-- its continuation field in the same hash (ARGV[10]) or one entry of the partition's
-- separate continuation hash (same field; ARGV[11] "0", 0.1.0's format), else out of line
-- (its own key); whatever the old payload left elsewhere is removed, in any of the three
-- places.
-- Record format: densekv/sessions/record.py; payload framing: densekv/sessions/payload.py.
-- KEYS[1]  the partition hash   KEYS[2] the session's out-of-line key
-- KEYS[3]  the partition's continuation hash   KEYS[4] its expiry zset (with ARGV[8], mode "zset")
-- ARGV[1]  field   ARGV[2] now (unix s)   ARGV[3] the new framed payload ("" for none)
-- ARGV[4]  the largest record the partition may hold (hash-max-listpack-value)
-- ARGV[5]  mode: "plain" | "zset" | "fieldttl" (re-apply the field TTL: HSET clears it;
--          no split: a continuation entry would have no TTL of its own)
-- ARGV[6]  compare-and-set: the record as the caller read it ("" = write unconditionally)
-- ARGV[7]  compare-and-set: the continuation or out-of-line value the caller read with it
-- ARGV[8]  with ARGV[9] (set_ttl): the new expires_at and absolute_at (unix s);
--          the record's header is rebuilt with them (it may grow or shrink by the 4 bytes
--          of absolute_at, so the payload is placed again under the limit like any
--          update), a zset's score (KEYS[4], mode "zset") and an out-of-line key's EXAT
--          follow. "": both expiries stay as they are
-- ARGV[10] the session's continuation field (partitioned.py cont_field), where a rest
--          beside the record (marker 12) is compared and removed
-- ARGV[11] "1": a split payload's rest goes in that field (marker 12); "0": in the
--          continuation hash KEYS[3] (marker 13), for partitions sized for one entry
-- Reply:   1 updated, 0 missing or expired, -2 changed since the caller read it
--          (nothing written in the last two cases)
-- Server time (benchmarks/lua_scripts.py): the script call and its redis.calls (HGET and
-- HSET for an inline update) are most of it; the Lua reads the header with one
-- string.byte, tests bits by %, and builds each record written in one concatenation.
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if not rec then return 0 end
local f, a, b, c, d = string.byte(rec, 1, 5)
local exp = ((a * 256 + b) * 256 + c) * 256 + d
if exp <= tonumber(ARGV[2]) then return 0 end
local pos = 6
local abs = exp
if f % 64 >= 32 then
  a, b, c, d = string.byte(rec, 6, 9)
  abs = ((a * 256 + b) * 256 + c) * 256 + d
  pos = 10
end
local len = f % 16
if len == 15 then len = string.byte(rec, pos); pos = pos + 1 end
pos = pos + len
-- where the old payload's rest is: 12 the continuation field, 13 the continuation hash,
-- 15 the out-of-line key, anything else nowhere (inline): only a rest that exists is
-- removed below
local tail
local cfield = ARGV[10]
if f >= 128 then tail = string.byte(rec, pos) end
if ARGV[6] ~= '' then
  if rec ~= ARGV[6] then return -2 end
  if tail == 12 and redis.call('HGET', KEYS[1], cfield) ~= ARGV[7] then return -2 end
  if tail == 13 and redis.call('HGET', KEYS[3], ARGV[1]) ~= ARGV[7] then return -2 end
  if tail == 15 and redis.call('GET', KEYS[2]) ~= ARGV[7] then return -2 end
end
local flags = f % 64
if ARGV[3] ~= '' then flags = flags + 128 end
local pre, mid -- the new record's head is pre .. mid
if ARGV[8] ~= '' then
  local function be32(n)
    return string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256,
                       math.floor(n / 256) % 256, n % 256)
  end
  local ident_at = 6
  if flags % 64 >= 32 then ident_at = 10 end
  exp, abs = tonumber(ARGV[8]), tonumber(ARGV[9])
  local times = be32(exp)
  if flags % 64 >= 32 then flags = flags - 32 end
  if abs ~= exp then
    flags = flags + 32
    times = times .. be32(abs)
  end
  pre, mid = string.char(flags) .. times, string.sub(rec, ident_at, pos - 1)
  if ARGV[5] == 'zset' then redis.call('ZADD', KEYS[4], exp, ARGV[1]) end
elseif flags == f then
  pre, mid = '', string.sub(rec, 1, pos - 1)
else
  pre, mid = string.char(flags), string.sub(rec, 2, pos - 1)
end
local limit = tonumber(ARGV[4])
local payload = ARGV[3]
local hlen = #pre + #mid
local first = limit - hlen - 1
if hlen + #payload <= limit then
  if tail == 12 then
    redis.call('HDEL', KEYS[1], cfield)
  elseif tail == 13 then
    redis.call('HDEL', KEYS[3], ARGV[1])
  elseif tail == 15 then
    redis.call('DEL', KEYS[2])
  end
  redis.call('HSET', KEYS[1], ARGV[1], pre .. mid .. payload)
elseif ARGV[5] ~= 'fieldttl' and first > 0 and #payload - first <= limit then
  if ARGV[11] == '1' then
    redis.call('HSET', KEYS[1], ARGV[1], pre .. mid .. '\12' .. string.sub(payload, 1, first),
               cfield, string.sub(payload, first + 1))
    if tail == 13 then redis.call('HDEL', KEYS[3], ARGV[1]) end
  else
    redis.call('HSET', KEYS[1], ARGV[1], pre .. mid .. '\13' .. string.sub(payload, 1, first))
    redis.call('HSET', KEYS[3], ARGV[1], string.sub(payload, first + 1))
    if tail == 12 then redis.call('HDEL', KEYS[1], cfield) end
  end
  if tail == 15 then redis.call('DEL', KEYS[2]) end
else
  if tail == 12 then redis.call('HDEL', KEYS[1], cfield) end
  redis.call('HSET', KEYS[1], ARGV[1], pre .. mid .. '\15')
  redis.call('SET', KEYS[2], payload, 'EXAT', abs)
  if tail == 13 then redis.call('HDEL', KEYS[3], ARGV[1]) end
end
if ARGV[5] == 'fieldttl' then
  redis.call('HEXPIREAT', KEYS[1], exp, 'FIELDS', 1, ARGV[1])
end
return 1
