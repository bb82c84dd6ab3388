-- distlock fair queue, put in front of the fair scripts after clock.lua.
--
-- A fair lock's queue is two sorted sets in the lock key's slot: by arrival (member = a waiting
-- process's token, score = when it first queued, server µs) and by lapse (the same members,
-- score = when the entry lapses unless its waiter tries again, server ms).
--
-- drop_lapsed(queue, entries, now) removes the entries that lapsed by `now` from both, so a
-- waiter that died or vanished stops holding the queue back; returns the head's token after it
-- (nil when nobody queues).
local function drop_lapsed(queue, entries, now)
  local lapsed = redis.call('ZRANGEBYSCORE', entries, '-inf', now)
  if #lapsed > 0 then
    for _, token in ipairs(lapsed) do
      redis.call('ZREM', queue, token)
    end
    redis.call('ZREMRANGEBYSCORE', entries, '-inf', now)
  end
  return redis.call('ZRANGE', queue, 0, 0)[1]
end
