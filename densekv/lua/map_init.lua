-- map_init: create a compact map's metadata once; every later caller gets what is stored.
-- The first process to create a map fixes its geometry and alias table (compact.py).
-- KEYS[1]  the map's meta hash   KEYS[2] its alias hash (crumb -> alias)
-- ARGV[1]  number of meta fields n, then n name/value pairs, then alias crumb/alias pairs
-- Reply:   {flat meta hash, flat alias hash} as stored after the call
if redis.call('EXISTS', KEYS[1]) == 0 then
  local n = tonumber(ARGV[1])
  for i = 2, 1 + 2 * n, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
  for i = 2 + 2 * n, #ARGV, 2 do redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
end
return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}
