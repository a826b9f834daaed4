-- set_dense_add: add items to one partition of a dense (split-field) hash set, one flag each.
-- KEYS[1]  the partition key (a HASH)
-- ARGV     pairs: field (the quotient's high bytes), low (its low bits, "0".."127").
--          An item is held as field -> low (short form) or, when another item holds that
--          field, as field .. char(low) -> 1 (long form, one byte longer); a short field
--          whose prefix also has long forms carries low + 128 (the mark). Invariant: long
--          forms of a prefix exist only while its short field does, and it is marked.
--          The common case costs two commands for the whole call, not two per item: one
--          HMGET of every short field, then one HSET of the short fields that were free
--          (HSETNX would search the listpack twice per new item, HSET once, and each
--          redis.call has its own cost). Items whose field is taken by another item, or
--          claimed earlier in this call, then go one by one: HSETNX the short field;
--          only if taken, HGET it: same low -> present, else HSETNX the long form + mark.
-- Reply:   a list with, per pair in order, 1 if the item was new, 0 if already there
--          (a key of another type fails on the first command: WRONGTYPE, nothing written)
local key = KEYS[1]
local n = #ARGV / 2
local CHUNK = 1000 -- fields per HMGET / HSET (unpack's stack limit)
local vals = {}
for c = 1, n, CHUNK do
  local names = {}
  for i = c, math.min(n, c + CHUNK - 1) do names[#names + 1] = ARGV[2 * i - 1] end
  local got = redis.call('HMGET', key, unpack(names))
  for j = 1, #got do vals[c + j - 1] = got[j] end
end

local out, claimed, fresh, slow = {}, {}, {}, {}
for i = 1, n do
  local field, low = ARGV[2 * i - 1], ARGV[2 * i]
  local mine = claimed[field]
  local v = vals[i]
  if mine then -- an earlier item of this call took the field: a repeat, or a collision
    if mine == low then out[i] = 0 else out[i] = 0; slow[#slow + 1] = i end
  elseif v then
    if tonumber(v) % 128 == tonumber(low) then out[i] = 0 else out[i] = 0; slow[#slow + 1] = i end
  else
    claimed[field] = low
    fresh[#fresh + 1] = field
    fresh[#fresh + 1] = low
    out[i] = 1
  end
end
for c = 1, #fresh, 2 * CHUNK do
  redis.call('HSET', key, unpack(fresh, c, math.min(#fresh, c + 2 * CHUNK - 1)))
end

for _, i in ipairs(slow) do
  local field, low = ARGV[2 * i - 1], ARGV[2 * i]
  local added = redis.call('HSETNX', key, field, low)
  if added == 0 then
    local v = tonumber(redis.call('HGET', key, field))
    local l = tonumber(low)
    if v % 128 ~= l then
      added = redis.call('HSETNX', key, field .. string.char(l), 1)
      if v < 128 then redis.call('HSET', key, field, v + 128) end
    end
  end
  out[i] = added
end
return out
