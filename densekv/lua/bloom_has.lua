-- bloom_has: which items are probably in one shard of a densekv Bloom filter (read only).
-- An item is present if all k of its bits are set in any stage (densekv/sets/bloom_core.py).
-- KEYS[1]  the shard's state hash     KEYS[1+i]  the bitmap of stage i-1, i = 1..T
-- ARGV[1]  T: stages given   ARGV[2] N: items   ARGV[3..] T pairs (bytes, k)
-- ARGV[2T+3] the walks: per item, per given stage, the first bit a and step b as
--          little-endian u32 (8 bytes a pair, N * T pairs; see bloom_add.lua)
-- Reply:   {stages, results}: one char per item, "1" probably present, "0" absent; ""
--          for N > 0 when the shard has more stages than T (send again with more keys)
local T = tonumber(ARGV[1])
local N = tonumber(ARGV[2])
local bytes, bits, ks = {}, {}, {}
for s = 1, T do
  bytes[s] = tonumber(ARGV[2 * s + 1])
  bits[s] = 8 * bytes[s]
  ks[s] = tonumber(ARGV[2 * s + 2])
end
local walks = ARGV[2 * T + 3]
local byte = string.byte
local function u32(at)
  local b1, b2, b3, b4 = byte(walks, at + 1, at + 4)
  return b1 + b2 * 256 + b3 * 65536 + b4 * 16777216
end

local stages = 0
local st = redis.call('TYPE', KEYS[1])['ok']
if st == 'hash' then
  local v = redis.call('HGET', KEYS[1], 't')
  if not v then
    return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is a hash but not a densekv Bloom shard')
  end
  stages = tonumber(v)
elseif st ~= 'none' then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds a ' .. st)
end
if stages > T then
  return {stages, ''}
end
for s = 1, stages do
  local key = KEYS[1 + s]
  if redis.call('TYPE', key)['ok'] ~= 'string' or redis.call('STRLEN', key) ~= bytes[s] then
    return redis.error_reply('WRONGTYPE ' .. key .. ' is not the stage ' .. (s - 1) .. ' bitmap it should be')
  end
end

local out = {}
for j = 0, N - 1 do
  local base = j * 8 * T
  local found = 0
  for s = 1, stages do
    local key, m = KEYS[1 + s], bits[s]
    local pos = u32(base + 8 * (s - 1))
    local step = u32(base + 8 * (s - 1) + 4)
    local all = true
    for _ = 1, ks[s] do
      if redis.call('GETBIT', key, pos) == 0 then all = false; break end
      pos = pos + step
      if pos >= m then pos = pos - m end
    end
    if all then found = 1; break end
  end
  out[#out + 1] = found
end
return {stages, table.concat(out)}
