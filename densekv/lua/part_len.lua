-- part_len: what one partition hash holds: its entries and, of them, the continuation
-- fields (a split session's rest, its field .. '\0': one byte longer than a session's
-- field); {0, 0} for a repartition tombstone. Sessions = entries - continuations.
-- KEYS[1]  a partition hash (or the string a repartition left at its name)
-- ARGV[1]  the length of a continuation field in this partition
-- Reply:   {HLEN, continuation fields}. Counting them walks the field names (HKEYS):
--          O(entries), for stats and counts, never on a request's path
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then return {0, 0} end
local want = tonumber(ARGV[1])
local conts = 0
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  if #f == want then conts = conts + 1 end
end
return {redis.call('HLEN', KEYS[1]), conts}
