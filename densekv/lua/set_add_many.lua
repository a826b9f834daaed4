-- set_add_many: add several members to one partition of a compact set, one flag each.
-- KEYS[1]  the partition key (a SET, HASH or ZSET)
-- ARGV[1]  "set", "hash" or "zset"   ARGV[2..] the members
-- Reply:   a list with, per member in order, 1 if it was new, 0 if already there
--          (a key of another type fails on the first member: WRONGTYPE, nothing written)
local out = {}
local kind = ARGV[1]
for i = 2, #ARGV do
  if kind == 'set' then
    out[i - 1] = redis.call('SADD', KEYS[1], ARGV[i])
  elseif kind == 'hash' then
    out[i - 1] = redis.call('HSETNX', KEYS[1], ARGV[i], 1)
  else
    out[i - 1] = redis.call('ZADD', KEYS[1], 'NX', 1, ARGV[i])
  end
end
return out
