-- compare_and_set: replace a string value only if it still holds what the caller read.
-- KEYS[1]  the string key
-- ARGV[1]  the expected current value ("" with ARGV[3] == "absent" means "key must not exist")
-- ARGV[2]  the new value
-- ARGV[3]  "present" or "absent"
-- Reply:   1 if the value was replaced, 0 if the key held something else (nothing written)
local current = redis.call('GET', KEYS[1])
if ARGV[3] == 'absent' then
  if current then return 0 end
elseif current ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2])
return 1
