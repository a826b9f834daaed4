-- bloom_add: add items to one shard of a densekv Bloom filter (densekv/sets/bloom_core.py).
-- A shard is a state hash (t = stages made, n = items added, c = items in the last stage)
-- and one bitmap string per stage, all under one hash tag (one slot). An item is new
-- unless all k of its bits are set in some stage (GETBIT, stopping at the first 0); a new
-- item's bits go into the last stage (SETBIT, or BITFIELD SET u1: both return the old
-- bits), which gets a successor once it holds its capacity. Every key is checked before
-- anything is written: a key of another type (WRONGTYPE from HMGET / STRLEN), a string of
-- the wrong length, or a key where this call may start a stage, is left untouched and
-- the call fails.
-- KEYS[1]  the shard's state hash     KEYS[1+i]  the bitmap of stage i-1, i = 1..T
-- ARGV[1]  T: stages given (their keys and parameters; the last ones may not exist yet)
-- ARGV[2]  N: items   ARGV[3] budget: bits read or set after which the call stops
--          (checked before each item, so at most budget + one item's calls; the first
--          item is always handled)   ARGV[4] 1: set bits with BITFIELD, 0: with SETBIT
--          (the same bits either way; bloom_spec.set_rule picks the cheaper per server)
-- ARGV[5..] T triples (bytes, k, capacity)
-- ARGV[3T+5] the walks: per item, per given stage, a = h1 mod m (first bit) and
--          b = h2 mod m (step) as little-endian u32 (8 bytes a pair, N * T pairs)
-- Reply:   {stages, items added to the shard so far, items in its last stage, results}:
--          results has one char per item handled, "1" new, "0" probably present; fewer
--          than N when the budget ran out or the shard needs a stage beyond the T given
--          (none of the rest was touched; send them again); "" when the shard has more
--          than T stages (the caller's count is stale)
local T = tonumber(ARGV[1])
local N = tonumber(ARGV[2])
local budget = tonumber(ARGV[3])
local bitfield = ARGV[4] == '1'
local bytes, bits, ks, caps = {}, {}, {}, {}
for s = 1, T do
  bytes[s] = tonumber(ARGV[3 * s + 2])
  bits[s] = 8 * bytes[s]
  ks[s] = tonumber(ARGV[3 * s + 3])
  caps[s] = tonumber(ARGV[3 * s + 4])
end
local walks = ARGV[3 * T + 5]
local byte = string.byte
local call = redis.call
-- with BITFIELD, the last stage's bits are set by SET u1 <bit> 1, up to SET_OPS to a call
-- (the old bits come back, one per op, in order): 2 + 4 * 7 = 30 arguments stay within
-- the 32 argument objects redis.call keeps cached
local SET_OPS = 7
local set_args
if bitfield then
  set_args = {}
  for i = 0, SET_OPS - 1 do
    set_args[4 * i + 1] = 'SET'; set_args[4 * i + 2] = 'u1'; set_args[4 * i + 4] = 1
  end
end

local state = call('HMGET', KEYS[1], 't', 'n', 'c') -- WRONGTYPE unless a hash or nothing
local stages, n, c = 0, 0, 0
if state[1] then
  if not state[2] or not state[3] then
    return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is a hash but not a densekv Bloom shard')
  end
  stages, n, c = tonumber(state[1]), tonumber(state[2]), tonumber(state[3])
elseif call('EXISTS', KEYS[1]) == 1 then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is a hash but not a densekv Bloom shard')
end
if stages > T then
  return {stages, n, c, ''}
end
for s = 1, stages do -- STRLEN: WRONGTYPE for another type, the length for a string
  if call('STRLEN', KEYS[1 + s]) ~= bytes[s] then
    return redis.error_reply('WRONGTYPE ' .. KEYS[1 + s] .. ' is not the stage ' .. (s - 1) .. ' bitmap it should be')
  end
end
if stages < T and (stages == 0 or c + N >= caps[stages]) then -- this call may start stages
  for s = stages + 1, T do
    if call('EXISTS', KEYS[1 + s]) == 1 then
      return redis.error_reply('WRONGTYPE ' .. KEYS[1 + s] .. ' exists but no densekv stage was made there')
    end
  end
end

local out = {}
local ops = 0
local changed = false
for j = 0, N - 1 do
  if j > 0 and ops >= budget then break end
  if stages == 0 or c >= caps[stages] then
    if stages >= T then break end
    call('SETRANGE', KEYS[2 + stages], bytes[stages + 1] - 1, '\0')
    stages = stages + 1
    c = 0
    changed = true
  end
  local at = j * 8 * T -- offset of this item's pairs in walks
  local found = false
  for s = 1, stages - 1 do -- earlier stages: all k bits set there means present
    local p1, p2, p3, p4, q1, q2, q3, q4 = byte(walks, at + 8 * s - 7, at + 8 * s)
    local pos = p1 + p2 * 256 + p3 * 65536 + p4 * 16777216
    local step = q1 + q2 * 256 + q3 * 65536 + q4 * 16777216
    local key, m, all = KEYS[1 + s], bits[s], true
    for _ = 1, ks[s] do
      ops = ops + 1
      if call('GETBIT', key, pos) == 0 then all = false; break end
      pos = pos + step
      if pos >= m then pos = pos - m end
    end
    if all then found = true; break end
  end
  local new = 0
  if not found then -- set the bits in the last stage: new if one of them was 0
    local p1, p2, p3, p4, q1, q2, q3, q4 = byte(walks, at + 8 * stages - 7, at + 8 * stages)
    local pos = p1 + p2 * 256 + p3 * 65536 + p4 * 16777216
    local step = q1 + q2 * 256 + q3 * 65536 + q4 * 16777216
    local key, m, k = KEYS[1 + stages], bits[stages], ks[stages]
    if bitfield then
      local left = k
      while left > 0 do
        local cnt = left
        if cnt > SET_OPS then cnt = SET_OPS end
        for i = 0, cnt - 1 do
          set_args[4 * i + 3] = pos
          pos = pos + step
          if pos >= m then pos = pos - m end
        end
        local old = call('BITFIELD', key, unpack(set_args, 1, 4 * cnt))
        for i = 1, cnt do
          if old[i] == 0 then new = 1 end
        end
        left = left - cnt
      end
    else
      for _ = 1, k do
        if call('SETBIT', key, pos, 1) == 0 then new = 1 end
        pos = pos + step
        if pos >= m then pos = pos - m end
      end
    end
    ops = ops + k
  end
  if new == 1 then
    n = n + 1
    c = c + 1
    changed = true
  end
  out[j + 1] = new
end
if changed then
  call('HSET', KEYS[1], 't', stages, 'n', n, 'c', c)
end
return {stages, n, c, table.concat(out)}
