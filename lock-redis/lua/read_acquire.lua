-- distlock read acquire: take a reader's share of a read-write lock, with its own token and
-- expiry, in one atomic step. clock.lua is put in front of it.
--
-- KEYS[1]  the writer key: a string holding the writer's token, with a millisecond expiry
-- KEYS[2]  the readers: a sorted set, member = reader's token, score = its expiry (server ms)
-- KEYS[3]  the waiting writers: a sorted set, member = writer's token, score = when its record
--          lapses (server ms)
-- KEYS[4]  the fencing counter (its value is the last token issued; read only here)
-- ARGV[1]  the reader's token value ('dl:' and 32 hex characters)
-- ARGV[2]  TTL in milliseconds
-- ARGV[3]  1: writer preference (refuse while a writer waits), 0: ignore waiting writers
--
-- Returns {1, fencing token of the last write} when granted; {0, ms until the blocker may be
-- gone, 1} when a writer holds the lock (its PTTL, -1 if it never expires) or, with writer
-- preference, waits for it (until its record lapses). Expired readers and records are pruned.
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local writer = redis.call('PTTL', KEYS[1])
if writer ~= -2 then
  return {0, writer, 1}
end
if ARGV[3] == '1' then
  local waiting = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
  if waiting[2] then
    return {0, tonumber(waiting[2]) - now, 1}
  end
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
expire_with_last(KEYS[2])
-- The last write's token: the counter's value. Without a counter (never written, or its
-- retention ran out) the clock in microseconds, which every earlier token is below and every
-- later one above (fence.lua issues max(clock, last + 1)).
local last = redis.call('GET', KEYS[4])
if last then
  return {1, tonumber(last)}
end
local t = redis.call('TIME')
return {1, tonumber(t[1] .. string.sub('00000' .. t[2], -6))}
