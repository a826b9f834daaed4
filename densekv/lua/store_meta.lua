-- store_meta: read, create or advance a session store's metadata hash, atomically.
-- Fields: layout, partitions (current count), base (the count the store was made with:
-- it names the hash tags), from (the old count while a repartition runs; absent otherwise),
-- dict (the id of the zstd dictionary new payloads are written with; absent: none).
-- KEYS[1]  the metadata hash
-- ARGV[1]  op: "read" | "open" | "begin" | "finish" | "dict"
--   read:   no change
--   open:   ARGV[2] layout  ARGV[3] partitions  -> creates the hash if missing
--   begin:  ARGV[2] expected current partitions  ARGV[3] new partitions -> from := current,
--           partitions := new, only if partitions == ARGV[2] and no repartition runs
--   finish: ARGV[2] partitions -> drops `from` if partitions == ARGV[2]
--   dict:   ARGV[2] dictionary id -> dict := ARGV[2] if the hash exists
-- Reply:   the metadata as a flat field/value list (after the change, if any)
local op = ARGV[1]
if op == 'open' then
  if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('HSET', KEYS[1], 'layout', ARGV[2], 'partitions', ARGV[3], 'base', ARGV[3])
  end
elseif op == 'begin' then
  local cur = redis.call('HGET', KEYS[1], 'partitions')
  if cur == ARGV[2] and redis.call('HEXISTS', KEYS[1], 'from') == 0 then
    redis.call('HSET', KEYS[1], 'from', cur, 'partitions', ARGV[3])
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
