-- distlock semaphore acquire: take ARGV[2] permits of ARGV[3], all or none, as one lease with its
-- own token and expiry. clock.lua and semaphore.lua are put in front of it.
--
-- KEYS[1]  the holders (sorted set scored by expiry, server ms)
-- KEYS[2]  the counts (hash: max, used, token -> permits)
-- ARGV[1]  the holder's token value
-- ARGV[2]  permits to take (1 <= permits <= max)
-- ARGV[3]  the semaphore's permit count (max)
-- ARGV[4]  TTL in milliseconds
--
-- Returns {1, 0} when granted; {0, ms until the soonest holder's expiry, 1} when fewer than
-- ARGV[2] permits are free; {-1, the max the holders use} when holders use another max (nothing
-- changed). A semaphore nobody holds takes this request's max.
local now = now_ms()
local used = prune(KEYS[1], KEYS[2], now)
local want, max = tonumber(ARGV[2]), tonumber(ARGV[3])
if used == 0 and redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[2], 'max', max, 'used', 0)
else
  local held_max = tonumber(redis.call('HGET', KEYS[2], 'max'))
  if held_max ~= max then
    return {-1, held_max or 0}
  end
end
if used + want > max then
  local soonest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, soonest[2] and (tonumber(soonest[2]) - now) or 0, 1}
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], want)
redis.call('HINCRBY', KEYS[2], 'used', want)
expire_semaphore(KEYS[1], KEYS[2])
return {1, 0}
