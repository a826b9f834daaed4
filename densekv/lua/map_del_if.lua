-- map_del_if: delete a plain key, or a bucket field, only if it still holds a given value
-- (the second step of a migration on a cluster, where key and bucket are in two slots).
-- KEYS[1]  the plain key or the bucket hash
-- ARGV[1]  the expected value   ARGV[2] field ("" = KEYS[1] is a plain key)
-- Reply:   1 deleted, 0 absent or different
local v
if ARGV[2] == '' then v = redis.call('GET', KEYS[1]) else v = redis.call('HGET', KEYS[1], ARGV[2]) end
if v ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('HDEL', KEYS[1], ARGV[2]) end
return 1
