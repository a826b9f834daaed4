-- set_dense_add: add items to one partition of a dense (split-field) hash set, one flag each.
-- KEYS[1]  the partition key (a HASH)
-- ARGV     pairs: field (the quotient's high bytes), low (its low bits, "0".."127").
--          An item is held as field -> low (short form) or, when another item holds that
--          field, as field .. char(low) -> 1 (long form, one byte longer); a short field
--          whose prefix also has long forms carries low + 128 (the mark). Invariant: long
--          forms of a prefix exist only while its short field does, and it is marked.
-- Reply:   a list with, per pair in order, 1 if the item was new, 0 if already there
--          (a key of another type fails on the first item: WRONGTYPE, nothing written)
local out = {}
local key = KEYS[1]
for i = 1, #ARGV, 2 do
  local field, low = ARGV[i], ARGV[i + 1]
  local added = redis.call('HSETNX', key, field, low)
  if added == 0 then
    local v = tonumber(redis.call('HGET', key, field))
    local l = tonumber(low)
    if v % 128 ~= l then
      added = redis.call('HSETNX', key, field .. string.char(l), 1)
      if v < 128 then redis.call('HSET', key, field, v + 128) end
    end
  end
  out[#out + 1] = added
end
return out
