-- bloom_meta: create a densekv Bloom filter's metadata hash, or read the one that exists.
-- Fields: kind ("densekv.bloom"), v (format), capacity, error_rate, shards, growth,
-- tightening, rule (allocator rounding), native (0/1), hash. Written once, never changed.
-- KEYS[1]  the metadata hash
-- ARGV     field, value pairs to write when the key does not exist ("" for read-only)
-- Reply:   the stored fields as a flat field, value list (empty if absent and read-only);
--          an error, nothing written, if the key is of another type or another hash
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then
  if #ARGV < 2 then return {} end
  redis.call('HSET', KEYS[1], unpack(ARGV))
elseif t ~= 'hash' then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds a ' .. t .. ', not a densekv Bloom filter')
elseif redis.call('HGET', KEYS[1], 'kind') ~= 'densekv.bloom' then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is a hash but not a densekv Bloom filter')
end
return redis.call('HGETALL', KEYS[1])
