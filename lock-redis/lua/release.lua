-- distlock release: compare-and-delete (safety rule 2), then announce the release to waiters.
-- A stale holder never deletes someone else's lock, and announces nothing.
--
-- KEYS[1]  the lock key
-- KEYS[2]  its release channel (declared as a key: it hashes to the lock key's cluster slot)
-- ARGV[1]  the lease's token
-- ARGV[2]  how to announce: 'PUBLISH', or 'SPUBLISH' (sharded pub/sub, on a Redis Cluster)
--
-- Returns 1 when the lock was ours and is deleted, 0 when it was not ours (left untouched).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] == 'SPUBLISH' then
    redis.call('SPUBLISH', KEYS[2], '')
  else
    redis.call('PUBLISH', KEYS[2], '')
  end
  return 1
end
return 0
