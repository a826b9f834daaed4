-- store_meta: read, create or advance a session store's metadata hash, atomically.
-- Fields: layout, partitions (current count), base (the count the store was made with:
-- it names the hash tags), from (the old count while a repartition runs; absent otherwise),
-- dict (the id of the zstd dictionary new payloads are written with; absent: none),
-- index (1 if the stores keep the identity index, 0 if not: stores that disagree would let
-- destroy_all miss sessions, so a store that disagrees refuses to open), cont ("here": split
-- payloads keep their rest in the partition hash, the partitions sized for it; absent in a
-- hash written by densekv 0.1.0, whose stores keep the separate continuation hash until a
-- repartition), life (the stores' lifecycle options as one canonical text, e.g.
-- "devices=1 limit=3 on_limit=evict stream=10000", "none" for an option off; a store whose
-- options differ refuses to open; absent in a hash written before it was kept).
-- KEYS[1]  the metadata hash
-- ARGV[1]  op: "read" | "open" | "begin" | "finish" | "dict" | "life"
--   read:   no change
--   open:   ARGV[2] layout  ARGV[3] partitions  ARGV[4] index (1/0)  ARGV[5] life (optional)
--           -> creates the hash if missing (also after a restart that lost it: the first
--           write re-creates it); records `index` and `life` in a hash written before they
--           were kept (never over a recorded one); a new hash gets cont
--   begin:  ARGV[2] expected current partitions  ARGV[3] new partitions -> from := current,
--           partitions := new, cont := here, only if partitions == ARGV[2] and no
--           repartition runs
--   finish: ARGV[2] partitions -> drops `from` if partitions == ARGV[2]
--   dict:   ARGV[2] dictionary id -> dict := ARGV[2] if the hash exists
--   life:   ARGV[2] the life the caller holds ('' none)  ARGV[3] the new one -> life :=
--           ARGV[3] if the hash holds a store's metadata (layout) and its life is ARGV[2] or
--           absent (a compare-and-set; never creates the hash, never into a foreign one)
-- Reply:   the metadata as a flat field/value list (after the change, if any)
local op = ARGV[1]
if op == 'open' then
  if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('HSET', KEYS[1], 'layout', ARGV[2], 'partitions', ARGV[3], 'base', ARGV[3], 'cont', 'here')
  end
  if ARGV[4] and redis.call('HEXISTS', KEYS[1], 'layout') == 1 then  -- never into a foreign hash
    redis.call('HSETNX', KEYS[1], 'index', ARGV[4])
    if ARGV[5] then
      redis.call('HSETNX', KEYS[1], 'life', ARGV[5])
    end
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
elseif op == 'life' then
  if redis.call('HEXISTS', KEYS[1], 'layout') == 1 then
    local cur = redis.call('HGET', KEYS[1], 'life')
    if not cur or cur == ARGV[2] then
      redis.call('HSET', KEYS[1], 'life', ARGV[3])
    end
  end
elseif op == 'finish' then
  if redis.call('HGET', KEYS[1], 'partitions') == ARGV[2] then
    redis.call('HDEL', KEYS[1], 'from')
  end
end
return redis.call('HGETALL', KEYS[1])
