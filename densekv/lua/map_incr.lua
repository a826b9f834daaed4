-- map_incr: add to an integer item, keeping its expiry; a missing or expired item starts
-- at 0 (with the given expiry wrapper). The server's HINCRBY does the 64-bit arithmetic
-- (Lua numbers are doubles), so the result is exact and stays a listpack integer.
-- KEYS[1]  the bucket hash
-- ARGV[1]  field   ARGV[2] delta   ARGV[3] now (unix s)
-- ARGV[4]  the 5-byte expiry wrapper head for a new item ("" = no expiry)
-- Reply:   {1, new value as text} or {0, error text} (nothing changed then)
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local head = ''
if cur and string.byte(cur, 1) == 14 then
  local a, b, c, d = string.byte(cur, 2, 5)
  if ((a * 256 + b) * 256 + c) * 256 + d <= tonumber(ARGV[3]) then
    redis.call('HDEL', KEYS[1], ARGV[1])
    cur = nil
  else
    head = string.sub(cur, 1, 5)
    redis.call('HSET', KEYS[1], ARGV[1], string.sub(cur, 6))
  end
end
if not cur then head = ARGV[4] end
local ok, res = pcall(redis.call, 'HINCRBY', KEYS[1], ARGV[1], ARGV[2])
if not ok then
  if cur then redis.call('HSET', KEYS[1], ARGV[1], cur) end
  return {0, res.err or tostring(res)}
end
-- the new value as text: from the reply while a double holds it exactly, else read back
local text
if res > -9007199254740992 and res < 9007199254740992 then
  text = string.format('%d', res)
else
  text = redis.call('HGET', KEYS[1], ARGV[1])
end
if head ~= '' then redis.call('HSET', KEYS[1], ARGV[1], head .. text) end
return {1, text}
