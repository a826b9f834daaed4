-- store_meta: read, create or advance a session store's metadata hash, atomically.
-- Fields: layout, partitions (current count), base (the count the store was made with:
-- it names the hash tags), from (the old count while a repartition runs; absent otherwise),
-- dict (the id of the zstd dictionary new payloads are written with; absent: none),
-- index (1 if the stores keep the identity index, 0 if not: stores that disagree would let
-- destroy_all miss sessions, so a store that disagrees refuses to open), cont ("here": split
-- payloads keep their rest in the partition hash, the partitions sized for it; absent in a
-- hash written by densekv 0.1.0, whose stores keep the separate continuation hash until a
-- repartition).
-- KEYS[1]  the metadata hash
-- ARGV[1]  op: "read" | "open" | "begin" | "finish" | "dict"
--   read:   no change
--   open:   ARGV[2] layout  ARGV[3] partitions  ARGV[4] index (1/0) -> creates the hash if
--           missing (also after a restart that lost it: the first write re-creates it);
--           records `index` in a hash written before it was kept; a new hash gets cont
--   begin:  ARGV[2] expected current partitions  ARGV[3] new partitions -> from := current,
--           partitions := new, cont := here, only if partitions == ARGV[2] and no
--           repartition runs
--   finish: ARGV[2] partitions -> drops `from` if partitions == ARGV[2]
--   dict:   ARGV[2] dictionary id -> dict := ARGV[2] if the hash exists
-- Reply:   the metadata as a flat field/value list (after the change, if any)
local op = ARGV[1]
if op == 'open' then
  if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('HSET', KEYS[1], 'layout', ARGV[2], 'partitions', ARGV[3], 'base', ARGV[3], 'cont', 'here')
  end
  if ARGV[4] and redis.call('HEXISTS', KEYS[1], 'layout') == 1 then  -- never into a foreign hash
    redis.call('HSETNX', KEYS[1], 'index', ARGV[4])
  end
elseif op == 'begin' then
  local cur = redis.call('HGET', KEYS[1], 'partitions')
  if cur == ARGV[2] and redis.call('HEXISTS', KEYS[1], 'from') == 0 then
    redis.call('HSET', KEYS[1], 'from', cur, 'partitions', ARGV[3], 'cont', 'here')
  end
elseif op == 'dict' then
  if redis.call('EXISTS', KEYS[1]) == 1 then
    redis.call('HSET', KEYS[1], 'dict', ARGV[2])
  end
elseif op == 'finish' then
  if redis.call('HGET', KEYS[1], 'partitions') == ARGV[2] then
    redis.call('HDEL', KEYS[1], 'from')
  end
end
return redis.call('HGETALL', KEYS[1])
