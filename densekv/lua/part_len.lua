-- part_len: what one partition hash holds: its entries and, of them, the continuation
-- fields (a split session's rest: partitioned.py cont_field); {0, 0} for a repartition
-- tombstone. Sessions = entries - continuations.
-- KEYS[1]  a partition hash (or the string a repartition left at its name)
-- ARGV[1]  the partition bits % 8: above 0, a continuation field has the top bit of its
--          first byte set (a session's field has it clear)
-- ARGV[2]  the length of a session's field here (with ARGV[1] 0, a continuation field is
--          one byte longer)
-- Reply:   {HLEN, continuation fields}. Counting them walks the field names (HKEYS):
--          O(entries), for stats and counts, never on a request's path
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then return {0, 0} end
local topbit, flen = ARGV[1] ~= '0', tonumber(ARGV[2])
local conts = 0
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  if (topbit and string.byte(f, 1) >= 128) or (not topbit and #f ~= flen) then conts = conts + 1 end
end
return {redis.call('HLEN', KEYS[1]), conts}
