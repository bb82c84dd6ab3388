-- distlock semaphore, put in front of the semaphore scripts after clock.lua.
--
-- A semaphore of one name is two keys in one cluster slot:
--   holders  a sorted set: member = a holder's token value, score = its expiry (server ms)
--   counts   a hash: 'max' = the permit count, 'used' = permits held, and one field per holder
--            token = the permits that holder holds
-- Both expire with the last holder (PEXPIREAT), so an abandoned semaphore leaves nothing.
--
-- prune(holders, counts, now) drops the holders whose lease expired, returning their permits,
-- and returns the permits in use; with no holder left both keys are deleted.
local function prune(holders, counts, now)
  local gone = redis.call('ZRANGEBYSCORE', holders, '-inf', now)
  if #gone > 0 then
    local freed = 0
    for _, token in ipairs(gone) do
      freed = freed + (tonumber(redis.call('HGET', counts, token)) or 0)
      redis.call('HDEL', counts, token)
    end
    redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
    redis.call('HINCRBY', counts, 'used', -freed)
  end
  if redis.call('ZCARD', holders) == 0 then
    redis.call('DEL', counts)
    return 0
  end
  return tonumber(redis.call('HGET', counts, 'used')) or 0
end

-- Expires both keys with the last holder.
local function expire_semaphore(holders, counts)
  local last = redis.call('ZRANGE', holders, -1, -1, 'WITHSCORES')
  if last[2] then
    redis.call('PEXPIREAT', holders, last[2])
    redis.call('PEXPIREAT', counts, last[2])
  end
end
