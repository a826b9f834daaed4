-- bloom_add: add items to one shard of a densekv Bloom filter (densekv/sets/bloom_core.py).
-- A shard is a state hash (t = stages made, n = items added, c = items in the last stage)
-- and one bitmap string per stage, all under one hash tag (one slot). An item is new
-- unless all k of its bits are set in some stage; a new item's bits go into the last
-- stage, which gets a successor once it holds its capacity. Every key is checked before
-- anything is written: a key of another type, or a string of the wrong length, is left
-- untouched and the call fails.
-- KEYS[1]  the shard's state hash     KEYS[1+i]  the bitmap of stage i-1, i = 1..T
-- ARGV[1]  T: stages given (their keys and parameters; the last ones may not exist yet)
-- ARGV[2]  N: items   ARGV[3..] T triples (bytes, k, capacity)   ARGV[3T+3] the walks:
--          per item, per given stage, a = h1 mod m (first bit) and b = h2 mod m (step)
--          as little-endian u32 (8 bytes a pair, N * T pairs)
-- Reply:   {stages, items added to the shard so far, results}: results has one char per
--          item handled, "1" new, "0" probably present; fewer than N when the shard needs
--          a stage beyond the T given (none of the rest was touched; send them again)
local T = tonumber(ARGV[1])
local N = tonumber(ARGV[2])
local bytes, bits, ks, caps = {}, {}, {}, {}
for s = 1, T do
  bytes[s] = tonumber(ARGV[3 * s])
  bits[s] = 8 * bytes[s]
  ks[s] = tonumber(ARGV[3 * s + 1])
  caps[s] = tonumber(ARGV[3 * s + 2])
end
local walks = ARGV[3 * T + 3]
local byte = string.byte
local function u32(at) -- the little-endian u32 at byte offset `at` (0-based) of walks
  local b1, b2, b3, b4 = byte(walks, at + 1, at + 4)
  return b1 + b2 * 256 + b3 * 65536 + b4 * 16777216
end

local stages, n, c = 0, 0, 0
local st = redis.call('TYPE', KEYS[1])['ok']
if st == 'hash' then
  local v = redis.call('HMGET', KEYS[1], 't', 'n', 'c')
  if not v[1] or not v[2] or not v[3] then
    return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is a hash but not a densekv Bloom shard')
  end
  stages, n, c = tonumber(v[1]), tonumber(v[2]), tonumber(v[3])
elseif st ~= 'none' then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds a ' .. st)
end
if stages > T then
  return {stages, n, ''} -- the caller's stage count is stale
end
for s = 1, T do
  local key = KEYS[1 + s]
  local kt = redis.call('TYPE', key)['ok']
  if s <= stages then
    if kt ~= 'string' or redis.call('STRLEN', key) ~= bytes[s] then
      return redis.error_reply('WRONGTYPE ' .. key .. ' is not the stage ' .. (s - 1) .. ' bitmap it should be')
    end
  elseif kt ~= 'none' then
    return redis.error_reply('WRONGTYPE ' .. key .. ' exists (' .. kt .. ') but no densekv stage was made there')
  end
end

local function has(s, base)
  local key, m = KEYS[1 + s], bits[s]
  local pos = u32(base + 8 * (s - 1))
  local step = u32(base + 8 * (s - 1) + 4)
  for _ = 1, ks[s] do
    if redis.call('GETBIT', key, pos) == 0 then return false end
    pos = pos + step
    if pos >= m then pos = pos - m end
  end
  return true
end

local out = {}
local changed = false
for j = 0, N - 1 do
  if stages == 0 or c >= caps[stages] then
    if stages >= T then break end
    redis.call('SETRANGE', KEYS[2 + stages], bytes[stages + 1] - 1, '\0')
    stages = stages + 1
    c = 0
    changed = true
  end
  local base = j * 8 * T -- offset of this item's pairs in walks
  local found = false
  for s = 1, stages - 1 do
    if has(s, base) then found = true; break end
  end
  local new = 0
  if not found then
    local key, m = KEYS[1 + stages], bits[stages]
    local pos = u32(base + 8 * (stages - 1))
    local step = u32(base + 8 * (stages - 1) + 4)
    for _ = 1, ks[stages] do
      if redis.call('SETBIT', key, pos, 1) == 0 then new = 1 end
      pos = pos + step
      if pos >= m then pos = pos - m end
    end
  end
  if new == 1 then
    n = n + 1
    c = c + 1
    changed = true
  end
  out[#out + 1] = new
end
if changed then
  redis.call('HSET', KEYS[1], 't', stages, 'n', n, 'c', c)
end
return {stages, n, table.concat(out)}
