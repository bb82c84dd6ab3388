-- distlock server clock, put in front of the read-write and semaphore scripts (see
-- lock-redis/src/scripts.rs). Their members expire at a score in milliseconds of the server's
-- clock, never the client's: every client of one name then agrees on what has expired.
--
-- now_ms() is the server's time in whole milliseconds since the Unix epoch (about 1.7e12, held
-- exactly by Lua's doubles).
local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end

-- Expires `key` (a sorted set scored by expiry) with its latest member, so it vanishes by itself
-- once every member has expired: nothing is left behind by holders that never came back.
local function expire_with_last(key)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then
    redis.call('PEXPIREAT', key, last[2])
  end
end
