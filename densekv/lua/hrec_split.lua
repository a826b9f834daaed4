-- hrec_split: move one partition of a partitioned session store into its 2^s children
-- (online repartition), atomically, leaving a tombstone string at the old hash's name.
-- A writer that still uses the old partition count gets WRONGTYPE from the tombstone,
-- re-reads the store's metadata and retries with the new count. Idempotent: an old key
-- that is already a tombstone is left alone; a missing one becomes a tombstone.
-- KEYS[1]         the old partition hash        KEYS[2] its expiry zset (mode "zset" only)
-- KEYS[3..]       the new partition hashes, child j at KEYS[3 + j] (then, in mode
--                 "zset", the new zsets in the same order); then the old continuation
--                 hash and the new ones in the same order (continuation entries move with
--                 their sessions; the old continuation hash gets a tombstone too)
-- ARGV[1]  s, the number of extra partition bits (1..8)   ARGV[2] rest_o = old bits % 8
-- ARGV[3]  drop = whole bytes the new field loses          ARGV[4] rest_n = new bits % 8
-- ARGV[5]  mode: "plain" | "zset" | "fieldttl"             ARGV[6] the tombstone text
-- ARGV[7]  the length of a session's field in the old partition. A continuation field
--          (partitioned.py cont_field: the field with the top bit of its first byte set,
--          or where the partition bits are whole bytes, the field and one 0x00 byte)
--          moves with its session, named for the new field the same way
-- ARGV[8]  "1": a split payload whose rest is in the old continuation hash (marker 13)
--          moves into the new partition hash as a continuation field (marker 12)
-- Reply:   the number of sessions moved
local s, rest_o = tonumber(ARGV[1]), tonumber(ARGV[2])
local drop, rest_n, mode = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local flen, here = tonumber(ARGV[7]), ARGV[8] == '1'
-- a new field's continuation field
local function cont_n(nf)
  if rest_n > 0 then return string.char(string.byte(nf, 1) + 128) .. string.sub(nf, 2) end
  return nf .. '\0'
end
local n = 2 ^ s
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'string' then return 0 end
local zbase = 2 + n  -- KEYS index of the first new zset is zbase + 1
local cbase = zbase  -- KEYS[cbase + 1] the old continuation hash, KEYS[cbase + 2 + j] child j's
if mode == 'zset' then cbase = zbase + n end
local moved = 0
if kind == 'hash' then
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    local f, rec = all[i], all[i + 1]
    local is_cont = false  -- a continuation field: f becomes its session's field
    if rest_o > 0 then
      local b = string.byte(f, 1)
      if b >= 128 then f, is_cont = string.char(b - 128) .. string.sub(f, 2), true end
    elseif #f ~= flen then
      f, is_cont = string.sub(f, 1, flen), true
    end
    local b0, b1 = string.byte(f, 1, 2)
    local j = math.floor((b0 * 256 + b1) / 2 ^ (16 - rest_o - s)) % n
    local rest = string.sub(f, drop + 1)
    local nf = string.char(string.byte(rest, 1) % 2 ^ (8 - rest_n)) .. string.sub(rest, 2)
    if is_cont then
      redis.call('HSET', KEYS[3 + j], cont_n(nf), rec)
    else
      local old = redis.call('HGET', KEYS[cbase + 1], f)
      local pos = 6  -- record.py: the payload's marker follows the header and the identity
      local fl = string.byte(rec, 1)
      if fl % 64 >= 32 then pos = 10 end
      local len = fl % 16
      if len == 15 then len = string.byte(rec, pos); pos = pos + 1 end
      pos = pos + len
      if old and here and fl >= 128 and string.byte(rec, pos) == 13 then
        redis.call('HSET', KEYS[3 + j], nf, string.sub(rec, 1, pos - 1) .. '\12' .. string.sub(rec, pos + 1),
                   cont_n(nf), old)
      else
        redis.call('HSET', KEYS[3 + j], nf, rec)
        if old then redis.call('HSET', KEYS[cbase + 2 + j], nf, old) end
      end
      if mode == 'zset' then
        local score = redis.call('ZSCORE', KEYS[2], f)
        if score then redis.call('ZADD', KEYS[zbase + 1 + j], score, nf) end
      elseif mode == 'fieldttl' then
        local at = redis.call('HPEXPIRETIME', KEYS[1], 'FIELDS', 1, f)[1]
        if at and at > 0 then redis.call('HPEXPIREAT', KEYS[3 + j], at, 'FIELDS', 1, nf) end
      end
      moved = moved + 1
    end
  end
elseif kind ~= 'none' then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is not a session partition')
end
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[1], ARGV[6])
redis.call('DEL', KEYS[cbase + 1])
redis.call('SET', KEYS[cbase + 1], ARGV[6])
if mode == 'zset' then
  redis.call('DEL', KEYS[2])
  redis.call('SET', KEYS[2], ARGV[6])
end
return moved
