-- distlock read-write release: end a reader's share, or the writer's lock, or withdraw a writer's
-- waiting record, and announce what may let waiters in. clock.lua is put in front of it.
--
-- KEYS[1]  the writer key (string)
-- KEYS[2]  the readers (sorted set)
-- KEYS[3]  the waiting writers (sorted set)
-- ARGV[1]  the token value
-- ARGV[2]  'r' for a reader's lease, 'w' for the writer's (or a writer that gave up waiting)
-- ARGV[3]  the release channel (same cluster slot; not in KEYS, see release.lua)
--
-- PUBLISH_COMMAND is replaced by PUBLISH or SPUBLISH before the script is loaded.
--
-- Announces when the last reader leaves (a writer may get in), when the writer leaves (readers
-- and writers may), and when the last waiting writer withdraws (readers held back may).
-- Returns 1 when the lease was ours and is released, 0 when it was not (nothing of another
-- holder is touched).
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local announce = false
local ours = 0
if ARGV[2] == 'r' then
  if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 then
    ours = 1
    announce = redis.call('EXISTS', KEYS[2]) == 0
  end
else
  if redis.call('ZREM', KEYS[3], ARGV[1]) == 1 then
    announce = redis.call('EXISTS', KEYS[3]) == 0
  end
  if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('DEL', KEYS[1])
    ours = 1
    announce = true
  end
end
if announce then
  redis.call('PUBLISH_COMMAND', ARGV[3], '')
end
return ours
