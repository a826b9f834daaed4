-- part_len: the number of sessions in one partition hash, 0 for a repartition tombstone.
-- KEYS[1]  a partition hash (or the string a repartition left at its name)
-- ARGV     none
-- Reply:   HLEN, or 0 when the key is not a hash
if redis.call('TYPE', KEYS[1])['ok'] == 'hash' then
  return redis.call('HLEN', KEYS[1])
end
return 0
