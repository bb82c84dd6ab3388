-- distlock semaphore extend: move one holder's expiry, and no one else's, if it still holds its
-- permits. clock.lua and semaphore.lua are put in front of it.
--
-- KEYS[1]  the holders; KEYS[2]  the counts
-- ARGV[1]  the holder's token value
-- ARGV[2]  the new TTL in milliseconds, counted from now
--
-- Returns 1 when extended, 0 when the holder's lease had expired or was released.
local now = now_ms()
prune(KEYS[1], KEYS[2], now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
expire_semaphore(KEYS[1], KEYS[2])
return 1
