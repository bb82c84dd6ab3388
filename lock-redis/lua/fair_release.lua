-- distlock fair release: release the lock if it is the token's, or withdraw the token's place in
-- the queue, and tell the head of the queue alone that its turn may have come (no herd).
-- clock.lua and fair.lua are put in front of it.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the queue (sorted set by arrival)
-- KEYS[3]  the entries (sorted set by lapse, server ms)
-- ARGV[1]  the token value
-- ARGV[2]  the name's release channel (told when nobody queues: plain waiters of the name)
-- ARGV[3]  the start of the turn channels: a waiter's channel is this followed by its token
--          (same cluster slot; channels are not in KEYS, see release.lua)
--
-- PUBLISH_COMMAND is replaced by PUBLISH or SPUBLISH before the script is loaded.
-- Returns 1 when the lock was the token's and is released, 0 otherwise (a withdrawn waiter, or a
-- lease that was no longer ours: nothing of another holder is touched).
local was_head = drop_lapsed(KEYS[2], KEYS[3], now_ms()) == ARGV[1]
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
local ours = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  ours = 1
end
if ours == 1 or was_head then
  local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if head then
    redis.call('PUBLISH_COMMAND', ARGV[3] .. head, '')
  elseif ours == 1 then
    redis.call('PUBLISH_COMMAND', ARGV[2], '')
  end
end
return ours
