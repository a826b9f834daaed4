-- bloom_native_reserve: BF.RESERVE one shard of a native (RedisBloom) densekv filter once.
-- KEYS[1]  the shard key
-- ARGV[1]  error rate   ARGV[2] capacity   ARGV[3] expansion
-- Reply:   1 reserved now, 0 it existed already; an error, nothing written, if the key
--          holds another type
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then
  redis.call('BF.RESERVE', KEYS[1], ARGV[1], ARGV[2], 'EXPANSION', ARGV[3])
  return 1
elseif t == 'MBbloom--' then
  return 0
end
return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds a ' .. t .. ', not a RedisBloom filter')
