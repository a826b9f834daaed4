-- blocked_has: which items are probably in a blocked Bloom filter (benchmark prototype,
-- benchmarks/bloom_blocked.py; read only). The filter is one plain string of `blocks`
-- blocks of 8 * NB bits; an item's k bits all lie in one block, so an item costs one
-- GETRANGE of its block (the only redis.call per item) and k bit tests in Lua
-- (string.byte and arithmetic, GETBIT's bit order).
-- KEYS[1]  the bitmap string (made full length when the filter is made; a short string
--          reads as zeros past its end)
-- ARGV[1]  N: items   ARGV[2] blocks   ARGV[3] NB: bytes per block (a power of 2 <= 256)
-- ARGV[4]  k   ARGV[5] W: bytes per position (1 if NB <= 32, else 2; NB <= 256)
-- ARGV[6]  S: the stride, bytes per item in ARGV[7]
-- ARGV[7]  the digests, S bytes an item: bytes 1-6 a little-endian u48 whose remainder
--          mod blocks is the block; then k positions of W bytes (S >= 6 + k W): W = 1,
--          byte x: bit x mod 8 of byte floor(x / 8) mod NB of the block; W = 2, bytes
--          x y: bit y mod 8 of byte x mod NB (uniform over the block when NB divides
--          256). A bit is tested as v % 2m >= m: two string.byte calls per bit, no other
--          C call
-- Reply:   one char per item, "1" probably present, "0" absent
local N, blocks, NB = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local k, W, S = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local d = ARGV[7]
local byte, call, key = string.byte, redis.call, KEYS[1]
local HALF = {128, 64, 32, 16, 8, 4, 2, 1} -- GETBIT's order: bit 0 of a byte is its high bit
local FULL = {256, 128, 64, 32, 16, 8, 4, 2} -- bit r of v is set iff v % FULL[r] >= HALF[r]
local zeros = string.rep('\0', NB)
local out = {}
for j = 0, N - 1 do
  local at = j * S
  local c1, c2, c3, c4, c5, c6 = byte(d, at + 1, at + 6)
  local blk = (c1 + c2 * 256 + c3 * 65536 + c4 * 16777216 + c5 * 4294967296 + c6 * 1099511627776) % blocks
  local s = call('GETRANGE', key, blk * NB, blk * NB + NB - 1)
  if #s < NB then s = s .. zeros:sub(1, NB - #s) end
  local found, p = 1, at + 7
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
    if byte(s, idx) % FULL[r] < HALF[r] then found = 0; break end
  end
  out[j + 1] = found
end
return table.concat(out)
