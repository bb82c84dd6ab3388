-- distlock semaphore release: return one holder's permits and announce it. clock.lua and
-- semaphore.lua are put in front of it.
--
-- KEYS[1]  the holders; KEYS[2]  the counts
-- ARGV[1]  the holder's token value
-- ARGV[2]  the release channel (same cluster slot; not in KEYS, see release.lua)
--
-- PUBLISH_COMMAND is replaced by PUBLISH or SPUBLISH before the script is loaded.
-- Returns 1 when the permits were the holder's and are returned, 0 when its lease had expired
-- (its permits were returned by the pruning) or was released already.
local now = now_ms()
prune(KEYS[1], KEYS[2], now)
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local permits = tonumber(redis.call('HGET', KEYS[2], ARGV[1])) or 0
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
else
  redis.call('HINCRBY', KEYS[2], 'used', -permits)
end
redis.call('PUBLISH_COMMAND', ARGV[2], '')
return 1
