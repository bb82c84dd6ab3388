-- distlock read extend: move one reader's expiry, and no one else's, if it is still a reader.
-- clock.lua is put in front of it.
--
-- KEYS[1]  the readers (sorted set scored by expiry, server ms)
-- ARGV[1]  the reader's token value
-- ARGV[2]  the new TTL in milliseconds, counted from now
--
-- Returns 1 when the reader's share was live and now expires ARGV[2] ms from now, 0 when it
-- had expired or was released (then nothing is changed but the pruning of expired readers).
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
expire_with_last(KEYS[1])
return 1
