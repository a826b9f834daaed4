-- hrec_sweep: remove the expired sessions of one partition, atomically.
-- A session whose expires_at is in the future is never touched; a removed session's
-- continuation (its continuation field in the same hash, or its entry of the separate
-- continuation hash) goes with it (its out-of-line key, if any, is the caller's to delete).
-- A continuation field whose session is gone (none should be) is removed too.
-- KEYS[1]  the partition hash   KEYS[2] its continuation hash
-- KEYS[3]  its expiry zset (mode "zset" only)
-- ARGV[1]  now (unix s)   ARGV[2] at most this many removals
-- ARGV[3]  mode: "plain" (scan the listpack) | "zset" (ZRANGEBYSCORE the index)
-- ARGV[4]  the partition bits % 8: above 0, a continuation field is its session's field
--          with the top bit of the first byte set (a session's field has it clear)
-- ARGV[5]  the length of a session's field here (with ARGV[4] 0, a continuation field is
--          the field and one 0x00 byte)
-- ARGV[6]  '1': a dry run, nothing removed (what a sweep at this `now` would remove, for
--          a store that announces expiries in its event stream before it removes them)
-- Reply:   flat list field1, record1, field2, record2, ... of what was removed
local now = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local topbit, flen = ARGV[4] ~= '0', tonumber(ARGV[5])
local dry = ARGV[6] == '1'
-- the session field a continuation field belongs to, or nil for a session's own field
local function owner(f)
  if topbit then
    local b = string.byte(f, 1)
    if b >= 128 then return string.char(b - 128) .. string.sub(f, 2) end
    return nil
  end
  if #f ~= flen then return string.sub(f, 1, flen) end
  return nil
end
local function cfield(f)
  if topbit then return string.char(string.byte(f, 1) + 128) .. string.sub(f, 2) end
  return f .. '\0'
end
local out = {}
local function u32(s, i)
  local a, b, c, d = string.byte(s, i, i + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end
if ARGV[3] == 'zset' then
  local due = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, limit)
  for _, field in ipairs(due) do
    local rec = redis.call('HGET', KEYS[1], field)
    if not dry then redis.call('ZREM', KEYS[3], field) end
    if rec and u32(rec, 2) <= now then
      if not dry then
        redis.call('HDEL', KEYS[1], field, cfield(field))
        redis.call('HDEL', KEYS[2], field)
      end
      out[#out + 1] = field
      out[#out + 1] = rec
    elseif rec and not dry then
      redis.call('ZADD', KEYS[3], u32(rec, 2), field)  -- index was stale: repair it
    end
  end
  return out
end
local all = redis.call('HGETALL', KEYS[1])
local cont = {}  -- the continuation fields, by their session's field
for i = 1, #all, 2 do
  local o = owner(all[i])
  if o then cont[o] = all[i] end
end
for i = 1, #all, 2 do
  local field = all[i]
  if not owner(field) then
    local c = cont[field]
    cont[field] = nil
    if #out < 2 * limit and u32(all[i + 1], 2) <= now then
      if not dry then
        if c then redis.call('HDEL', KEYS[1], field, c) else redis.call('HDEL', KEYS[1], field) end
        redis.call('HDEL', KEYS[2], field)
      end
      out[#out + 1] = field
      out[#out + 1] = all[i + 1]
    end
  end
end
if not dry then
  for _, c in pairs(cont) do redis.call('HDEL', KEYS[1], c) end  -- continuations of no session
end
return out
