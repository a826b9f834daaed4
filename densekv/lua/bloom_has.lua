-- bloom_has: which items are probably in one shard of a densekv Bloom filter (read only).
-- An item is present if all k of its bits are set in any stage (densekv/sets/bloom_core.py).
-- A stage's bits are read one GETBIT each, or, where the client's plan says so (a call
-- that reads many bits of a small stage: bloom_batch.plan_call), from a copy of the whole
-- stage taken with one GET at the start of the call and tested in Lua (string.byte and
-- bit.band: a fifth to a third of a GETBIT's time; the copy about 1 ns a byte). The
-- answers are the same either way.
-- KEYS[1]  the shard's state hash     KEYS[1+i]  the bitmap of stage i-1, i = 1..T
-- ARGV[1]  T: stages given   ARGV[2] N: items   ARGV[3] budget, in units of one GETBIT:
--          the call stops before the next item once it has spent this much (the first
--          item is always handled)
-- ARGV[4]  copies: "" = every stage by GETBIT; else "L C1 .. CT": a bit tested in a copy
--          costs L units, and stage i (if the shard has it) is copied for Ci units (0:
--          read by GETBIT)
-- ARGV[5..] T pairs (bytes, k)
-- ARGV[2T+5] the walks: per item, per given stage, the first bit a and step b as
--          little-endian u32 (8 bytes a pair, N * T pairs; see bloom_add.lua)
-- Reply:   {stages, results}: one char per item handled, "1" probably present, "0"
--          absent; fewer than N when the budget ran out (send the rest again); "" when
--          the shard has more stages than T (send again with more keys)
local T = tonumber(ARGV[1])
local N = tonumber(ARGV[2])
local budget = tonumber(ARGV[3])
local bytes, bits, ks = {}, {}, {}
for s = 1, T do
  bytes[s] = tonumber(ARGV[2 * s + 3])
  bits[s] = 8 * bytes[s]
  ks[s] = tonumber(ARGV[2 * s + 4])
end
local walks = ARGV[2 * T + 5]
local byte = string.byte
local call = redis.call

local stages = 0
local t = call('HGET', KEYS[1], 't') -- WRONGTYPE unless a hash or nothing
if t then
  stages = tonumber(t)
elseif call('EXISTS', KEYS[1]) == 1 then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is a hash but not a densekv Bloom shard')
end
if stages > T then
  return {stages, ''}
end
for s = 1, stages do
  if call('STRLEN', KEYS[1 + s]) ~= bytes[s] then
    return redis.error_reply('WRONGTYPE ' .. KEYS[1 + s] .. ' is not the stage ' .. (s - 1) .. ' bitmap it should be')
  end
end

local ops = 0
local copy -- stage -> its bitmap, where copied
local band, MASK, local_cost
if ARGV[4] ~= '' then
  copy = {}
  local s = 0
  for word in string.gmatch(ARGV[4], '%S+') do
    local units = tonumber(word)
    if s == 0 then
      local_cost = units
    elseif s <= stages and units > 0 then
      local str = call('GET', KEYS[1 + s])
      ops = ops + units
      if str and #str >= bytes[s] then copy[s] = str end -- else GETBIT (bits past a string's end are 0)
    end
    s = s + 1
  end
  band, MASK = bit.band, {128, 64, 32, 16, 8, 4, 2, 1} -- GETBIT's order: bit 0 is the high bit
end

local out = {}
for j = 0, N - 1 do
  if j > 0 and ops >= budget then break end
  local at = j * 8 * T
  local found = 0
  for s = 1, stages do
    local p1, p2, p3, p4, q1, q2, q3, q4 = byte(walks, at + 8 * s - 7, at + 8 * s)
    local pos = p1 + p2 * 256 + p3 * 65536 + p4 * 16777216
    local step = q1 + q2 * 256 + q3 * 65536 + q4 * 16777216
    local m, all, str = bits[s], true, copy and copy[s]
    if str then
      for _ = 1, ks[s] do
        ops = ops + local_cost
        local r = pos % 8
        if band(byte(str, (pos - r) / 8 + 1), MASK[r + 1]) == 0 then all = false; break end
        pos = pos + step
        if pos >= m then pos = pos - m end
      end
    else
      local key = KEYS[1 + s]
      for _ = 1, ks[s] do
        ops = ops + 1
        if call('GETBIT', key, pos) == 0 then all = false; break end
        pos = pos + step
        if pos >= m then pos = pos - m end
      end
    end
    if all then found = 1; break end
  end
  out[j + 1] = found
end
return {stages, table.concat(out)}
