-- blocked_add: add items to a blocked Bloom filter (benchmark prototype,
-- benchmarks/bloom_blocked.py). Per item: one GETRANGE of its block, its k bits tested in
-- Lua (as blocked_has.lua); if any is 0 the item is new and the changed bytes are written
-- back as ARGV[8] says (bloom_blocked.py --write-modes measures which is cheapest):
--   block  SETRANGE of the whole modified block
--   span   SETRANGE of the bytes from the first changed one to the last
--   splice the same bytes, built from the changed bytes and the runs between them
--          (string.sub) instead of a table of every byte
--   u8     one BITFIELD with a SET u8 per changed byte
--   setbit one SETBIT per bit that was 0 (no string built, but a call per bit)
--   bytes  one SETRANGE of one byte per changed byte
-- (the same bits either way). The count key gets one INCRBY of the call's new items at
-- the end, so the count is exact (a script call is atomic; an item twice in one call is
-- new once: its second GETRANGE sees the first one's bits).
-- KEYS[1]  the bitmap string   KEYS[2] the count (a string integer)
-- ARGV[1..7] as blocked_has.lua   ARGV[8] the write: block, span, splice, u8, setbit or bytes
-- Reply:   {new items in this call, one char per item: "1" new, "0" probably present}
local N, blocks, NB = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local k, W, S = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local d, mode = ARGV[7], ARGV[8]
local MODES = {block = true, span = true, splice = true, u8 = true, setbit = true, bytes = true}
if not MODES[mode] then
  return redis.error_reply('ERR write mode is block, span, splice, u8, setbit or bytes, not ' .. tostring(mode))
end
local byte, char, call, key = string.byte, string.char, redis.call, KEYS[1]
local HALF = {128, 64, 32, 16, 8, 4, 2, 1} -- GETBIT's order: bit 0 of a byte is its high bit
local FULL = {256, 128, 64, 32, 16, 8, 4, 2} -- bit r of v is set iff v % FULL[r] >= HALF[r]
local zeros = string.rep('\0', NB)
local cidx, cval, args, parts, bits = {}, {}, {}, {}, {} -- the current item's changes (reused)
local out, new = {}, 0
for j = 0, N - 1 do
  local at = j * S
  local c1, c2, c3, c4, c5, c6 = byte(d, at + 1, at + 6)
  local blk = (c1 + c2 * 256 + c3 * 65536 + c4 * 16777216 + c5 * 4294967296 + c6 * 1099511627776) % blocks
  local base = blk * NB
  local s = call('GETRANGE', key, base, base + NB - 1)
  if #s < NB then s = s .. zeros:sub(1, NB - #s) end
  local nc, nb, p = 0, 0, at + 7
  for _ = 1, k do
    local x, y = byte(d, p, p + W - 1)
    local idx, r
    if W == 1 then
      r = x % 8
      idx = ((x - r) / 8) % NB + 1
      r = r + 1
    else
      idx, r = x % NB + 1, y % 8 + 1
    end
    p = p + W
    local m = HALF[r]
    local c = 1
    while c <= nc and cidx[c] ~= idx do c = c + 1 end
    local v
    if c <= nc then v = cval[c] else v = byte(s, idx) end
    if v % FULL[r] < m then
      if c > nc then nc = c; cidx[c] = idx end
      cval[c] = v + m
      nb = nb + 1; bits[nb] = 8 * (base + idx - 1) + r - 1
    end
  end
  if nc == 0 then
    out[j + 1] = 0
  else
    out[j + 1] = 1
    new = new + 1
    if mode == 'bytes' then
      for c = 1, nc do call('SETRANGE', key, base + cidx[c] - 1, char(cval[c])) end
    elseif mode == 'setbit' then
      for b = 1, nb do call('SETBIT', key, bits[b], 1) end
    elseif mode == 'splice' then -- sort the changed bytes, then the unchanged runs between them
      for a = 2, nc do
        local i, v, b = cidx[a], cval[a], a - 1
        while b >= 1 and cidx[b] > i do cidx[b + 1] = cidx[b]; cval[b + 1] = cval[b]; b = b - 1 end
        cidx[b + 1] = i; cval[b + 1] = v
      end
      local n = 0
      for c = 1, nc do
        if c > 1 and cidx[c] > cidx[c - 1] + 1 then n = n + 1; parts[n] = s:sub(cidx[c - 1] + 1, cidx[c] - 1) end
        n = n + 1; parts[n] = char(cval[c])
      end
      call('SETRANGE', key, base + cidx[1] - 1, table.concat(parts, '', 1, n))
    elseif mode == 'u8' then
      for c = 1, nc do
        args[4 * c - 3] = 'SET'; args[4 * c - 2] = 'u8'
        args[4 * c - 1] = 8 * (base + cidx[c] - 1); args[4 * c] = cval[c]
      end
      call('BITFIELD', key, unpack(args, 1, 4 * nc))
    else
      local lo, hi = 1, NB
      if mode == 'span' then
        lo, hi = cidx[1], cidx[1]
        for c = 2, nc do
          if cidx[c] < lo then lo = cidx[c] elseif cidx[c] > hi then hi = cidx[c] end
        end
      end
      local t = {byte(s, lo, hi)}
      for c = 1, nc do t[cidx[c] - lo + 1] = cval[c] end
      call('SETRANGE', key, base + lo - 1, char(unpack(t)))
    end
  end
end
if new > 0 then call('INCRBY', KEYS[2], new) end
return {new, table.concat(out)}
