-- set_dense_remove: remove items from one partition of a dense (split-field) hash set.
-- KEYS[1]  the partition key (a HASH)
-- ARGV[1]  the largest low value (2^low bits - 1); ARGV[2..] pairs: field, low, as in
--          set_dense_add (short form field -> low, or low + 128 when the prefix also has
--          long forms field .. char(low) -> 1). Removing a marked short item moves one
--          long form into the short field; removing the last long form clears the mark.
-- Reply:   a list with, per pair in order, 1 if the item was there (now removed), else 0
--          (a key of another type: WRONGTYPE, nothing written)
local out = {}
local key = KEYS[1]
local maxlow = tonumber(ARGV[1])
for i = 2, #ARGV, 2 do
  local field, l = ARGV[i], tonumber(ARGV[i + 1])
  local v = redis.call('HGET', key, field)
  local removed = 0
  if v then
    v = tonumber(v)
    if v < 128 then
      if v == l then removed = redis.call('HDEL', key, field) end
    else
      if v - 128 ~= l then removed = redis.call('HDEL', key, field .. string.char(l)) end
      local names = {}
      for x = 0, maxlow do names[#names + 1] = field .. string.char(x) end
      local got = redis.call('HMGET', key, unpack(names))
      local first, more = nil, false
      for x = 0, maxlow do
        if got[x + 1] then
          if first then more = true break end
          first = x
        end
      end
      if v - 128 == l then
        removed = 1
        if first then
          redis.call('HDEL', key, field .. string.char(first))
          redis.call('HSET', key, field, first + (more and 128 or 0))
        else
          redis.call('HDEL', key, field)
        end
      elseif removed == 1 and not first then
        redis.call('HSET', key, field, v - 128)
      end
    end
  end
  out[#out + 1] = removed
end
return out
