-- ix_admit: list a session under its identity, keeping the identity's live sessions at or
-- under a limit, atomically (the identity's entries all live in this one hash: one slot).
-- Used only by stores that track devices or limit sessions (densekv/sessions/index.py):
-- values of format 1 (a limit): bytes 1 0xD1 | 2-5 absolute_at | 6-9 expires_at |
-- 10-13 created_at | 14-17 line | 18- label; of format 2 (devices, no limit): 1 0xD2 |
-- 2-5 absolute_at | 6-9 created_at | 10- label. A "line" is one device's session through
-- its rotations (login, regenerate): the limit counts live lines, not entries, so a
-- rotation under way (its old and new entries both listed) is one session. A format-2 or
-- format-0 entry (written before the limit was on) is a line of its own.
-- KEYS[1]  an identity-index partition hash
-- ARGV[1]  HSCAN MATCH pattern of the identity's entries (its escaped prefix and *)
-- ARGV[2]  the new entry's field          ARGV[3] its value (format 1: a new line, or 2)
-- ARGV[4]  the source entry's field ('' none): the session rotates from there; the new
--          entry continues that line (created_at, line, and label unless ARGV[5] is '1'),
--          in ARGV[3]'s format; from a format-2 source into format 1 it is a new line
--          (created_at and label carried) and the limit applies
-- ARGV[5]  '1': ARGV[3]'s label replaces the source's   ARGV[6] now (unix s)
-- ARGV[7]  the limit of live lines (0: none)   ARGV[8] 'evict' | 'refuse'
-- Reply:   {1, evicted field, ...} listed (evicted: every entry of the lines removed to
--          make room, least recently seen first: lowest expires_at, then created_at);
--          {0} refused (the limit reached, policy refuse): nothing written;
--          {-1} the source entry is gone (its session was evicted or ended): nothing written
local now = tonumber(ARGV[6])
local limit = tonumber(ARGV[7])
local function u32(s, i)
  local a, b, c, d = string.byte(s, i, i + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end
local function v1(v) return v and #v >= 17 and string.byte(v, 1) == 0xD1 end
local function v2(v) return v and #v >= 9 and string.byte(v, 1) == 0xD2 end
local value = ARGV[3]
if ARGV[4] ~= '' then
  local src = redis.call('HGET', KEYS[1], ARGV[4])
  if not src then return {-1} end
  if v1(src) or v2(src) then
    local created, line, label
    if v1(src) then
      created, line, label = string.sub(src, 10, 13), string.sub(src, 14, 17), string.sub(src, 18)
    else
      created, label = string.sub(src, 6, 9), string.sub(src, 10)
    end
    if v1(value) then
      if ARGV[5] == '1' then label = string.sub(value, 18) end
      value = string.sub(value, 1, 9) .. created .. (line or string.sub(value, 14, 17)) .. label
      if line then
        redis.call('HSET', KEYS[1], ARGV[2], value)
        return {1}
      end
      -- a format-2 source (listed before the limit was on): a new line, under the limit
    else
      if ARGV[5] == '1' then label = string.sub(value, 10) end
      redis.call('HSET', KEYS[1], ARGV[2], string.sub(value, 1, 5) .. created .. label)
      return {1}
    end
  end
  -- a format-0 source (listed before devices or the limit were on) starts a line here
end
if limit > 0 then
  local lines, order = {}, {}
  local cursor = '0'
  repeat
    local r = redis.call('HSCAN', KEYS[1], cursor, 'MATCH', ARGV[1], 'COUNT', 1000)
    cursor = r[1]
    for i = 1, #r[2], 2 do
      local f, v = r[2][i], r[2][i + 1]
      if f ~= ARGV[2] and f ~= ARGV[4] then
        local id, seen, created, live
        if v1(v) then
          id, seen, created = string.sub(v, 14, 17), u32(v, 6), u32(v, 10)
          live = u32(v, 2) > now and seen > now
        elseif v2(v) then  -- format 2: no last touch kept; a line of its own
          id, seen, created = f, 0, u32(v, 6)
          live = u32(v, 2) > now
        else  -- format 0: the day its absolute expiry passes; a line of its own
          id, seen, created, live = f, 0, 0, true
        end
        if live then
          local l = lines[id]
          if not l then
            l = {seen = seen, created = created, fields = {}}
            lines[id] = l
            order[#order + 1] = l
          elseif seen > l.seen then
            l.seen = seen
          end
          l.fields[#l.fields + 1] = f
        end
      end
    end
  until cursor == '0'
  if #order >= limit then
    if ARGV[8] == 'refuse' then return {0} end
    table.sort(order, function(a, b)
      if a.seen ~= b.seen then return a.seen < b.seen end
      return a.created < b.created
    end)
    local out = {1}
    for i = 1, #order - limit + 1 do
      for _, f in ipairs(order[i].fields) do
        redis.call('HDEL', KEYS[1], f)
        out[#out + 1] = f
      end
    end
    redis.call('HSET', KEYS[1], ARGV[2], value)
    return out
  end
end
redis.call('HSET', KEYS[1], ARGV[2], value)
return {1}
