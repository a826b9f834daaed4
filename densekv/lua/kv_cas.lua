-- kv_cas: replace a string value only if it still holds what the caller read; keep TTL.
-- KEYS[1]  the key
-- ARGV[1]  the value read   ARGV[2] the new value
-- ARGV[3]  optional (set_ttl): a new expiry, unix s (EXAT) instead of keeping the TTL
-- Reply:   1 replaced, 0 the key changed or vanished in between (nothing written)
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[3] and ARGV[3] ~= '' then
  redis.call('SET', KEYS[1], ARGV[2], 'EXAT', ARGV[3])
else
  redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
end
return 1
