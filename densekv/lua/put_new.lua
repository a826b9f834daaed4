-- put_new: store a new session only if no live session holds its token (create(token=):
-- a session moved in under its old cookie value, Django's save(must_create=True) with a
-- key). The writes are the layout's own put (densekv/sessions/layouts/*.py plan_put),
-- passed in as commands, run only after the check, in this one atomic step.
-- KEYS[1]  where the session would live: its partition hash (ARGV[1] "field") or its own
--          key (ARGV[1] "key")
-- KEYS[2]  "field" only: the partition's continuation hash   KEYS[3] the session's
--          out-of-line key (a dead record, its continuation field ARGV[3] and its parts
--          there are removed before the writes)
-- KEYS[..] every other key the commands write (declared for the cluster slot check)
-- ARGV[1]  "field" | "key"   ARGV[2] the field, ARGV[3] its continuation field ("field" only)
-- ARGV[4]  now (unix s)   ARGV[5] n: commands, then per command its argument count and its
--          arguments
-- Reply:   1 stored; 0 a live session holds the token (nothing written)
if ARGV[1] == 'field' then
  local rec = redis.call('HGET', KEYS[1], ARGV[2])
  if rec then
    local a, b, c, d = string.byte(rec, 2, 5)
    if ((a * 256 + b) * 256 + c) * 256 + d > tonumber(ARGV[4]) then return 0 end
    redis.call('HDEL', KEYS[1], ARGV[2], ARGV[3]) -- a dead record and its payload parts
    redis.call('HDEL', KEYS[2], ARGV[2])
    redis.call('DEL', KEYS[3])
  end
elseif redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local at = 6
for _ = 1, tonumber(ARGV[5]) do
  local n = tonumber(ARGV[at])
  redis.call(unpack(ARGV, at + 1, at + n))
  at = at + n + 1
end
return 1
