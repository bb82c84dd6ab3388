-- distlock fair acquire: the mutex of a name, granted only to the head of its queue of fair
-- waiters, with a fencing token, in one atomic step. clock.lua, fence.lua and fair.lua are put
-- in front.
--
-- KEYS[1]  the lock key (the mutex's: a fair holder and a plain one exclude each other)
-- KEYS[2]  the fencing counter
-- KEYS[3]  the queue: a sorted set, member = a waiter's token, score = when it first queued
--          (server µs), so the order is the order of arrival
-- KEYS[4]  the entries: a sorted set, member = a waiter's token, score = when its entry lapses
--          (server ms) unless the waiter tries again
-- ARGV[1]  the waiter's token value ('dl:' and 32 hex characters)
-- ARGV[2]  TTL of the lock in milliseconds
-- ARGV[3]  how long the waiter's entry lasts, in milliseconds; 0 for a single try, which is
--          granted only when nobody queues and takes no place in the queue
-- ARGV[4]  how long the fencing counter is kept after the last grant, in milliseconds
--
-- Entries that lapsed (their waiter died or gave up without withdrawing) are dropped first, so
-- a dead waiter never blocks the queue past its entry's expiry.
-- Returns {1, fencing token} when granted (the waiter leaves the queue); {0, ms until the holder's
-- expiry or the head's entry lapses, announces} when not: the waiter keeps (or takes) its place,
-- its entry renewed. announces is 0 when the holder is another client's (it never announces).
local now = now_ms()
local head = drop_lapsed(KEYS[3], KEYS[4], now)
local busy, announces
if head == nil or head == ARGV[1] then
  local holder = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2], 'GET')
  if not holder then
    if head then
      redis.call('ZREM', KEYS[3], ARGV[1])
      redis.call('ZREM', KEYS[4], ARGV[1])
    end
    local fence, err = issue_fence(KEYS[2], ARGV[4])
    if err then
      redis.call('DEL', KEYS[1])
      return err
    end
    return {1, fence}
  end
  busy = redis.call('PTTL', KEYS[1])
  announces = string.sub(holder, 1, 3) == 'dl:' and 1 or 0
  if announces == 1 and busy > 0 then
    -- A plain holder's release (release.lua) announces only a marked wait: mark it, as
    -- acquire.lua does (the mark is named like the release channel).
    redis.pcall('SET', string.sub(KEYS[2], 1, -6) .. 'released', '1', 'PX', busy + 1000)
  end
else
  busy = tonumber(redis.call('ZSCORE', KEYS[4], head)) - now
  announces = 1
end
if ARGV[3] ~= '0' then
  local t = redis.call('TIME')
  redis.call('ZADD', KEYS[3], 'NX', t[1] .. string.sub('00000' .. t[2], -6), ARGV[1])
  redis.call('ZADD', KEYS[4], now + tonumber(ARGV[3]), ARGV[1])
  local last = redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', KEYS[3], last[2])
  redis.call('PEXPIREAT', KEYS[4], last[2])
end
return {0, busy, announces}
