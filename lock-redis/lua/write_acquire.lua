-- distlock write acquire: take the write lock of a read-write lock when no writer and no reader
-- holds it, with a fencing token, in one atomic step. clock.lua and fence.lua are put in front.
--
-- KEYS[1]  the writer key (string: the writer's token, millisecond expiry)
-- KEYS[2]  the readers (sorted set scored by expiry, server ms)
-- KEYS[3]  the waiting writers (sorted set scored by when each record lapses, server ms)
-- KEYS[4]  the fencing counter
-- ARGV[1]  the writer's token value
-- ARGV[2]  TTL in milliseconds
-- ARGV[3]  1: writer preference (record this writer as waiting when busy), 0: record nothing
-- ARGV[4]  how long the fencing counter is kept after the last grant, in milliseconds
--
-- Returns {1, fencing token} when granted (the writer's waiting record, if any, is removed);
-- {0, ms until the holders may be gone, 1} when busy: the writer's PTTL (-1: never expires), or
-- the time until the last reader's expiry. Busy with writer preference, the writer's record is
-- added or renewed for ARGV[2] ms; the writer withdraws it by releasing its token.
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local busy = redis.call('PTTL', KEYS[1])
if busy == -2 then
  local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  busy = last[2] and (tonumber(last[2]) - now) or nil
end
if busy then
  if ARGV[3] == '1' then
    redis.call('ZADD', KEYS[3], now + tonumber(ARGV[2]), ARGV[1])
    expire_with_last(KEYS[3])
  end
  return {0, busy, 1}
end
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local fence, err = issue_fence(KEYS[4], ARGV[4])
if err then
  redis.call('DEL', KEYS[1])
  return err
end
return {1, fence}
