-- distlock release: compare-and-delete (safety rule 2), then announce the release to waiters.
-- A stale holder never deletes someone else's lock, and announces nothing.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the lease's token
-- ARGV[2]  how to announce: 'PUBLISH', or 'SPUBLISH' (sharded pub/sub, on a Redis Cluster)
-- ARGV[3]  the release channel; it hashes to the lock key's slot. It is not declared in KEYS on
--          purpose: a declared key that never exists makes Redis Cluster answer TRYAGAIN while
--          the slot migrates, which would block every release during a resharding.
--
-- Returns 1 when the lock was ours and is deleted, 0 when it was not ours (left untouched).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] == 'SPUBLISH' then
    redis.call('SPUBLISH', ARGV[3], '')
  else
    redis.call('PUBLISH', ARGV[3], '')
  end
  return 1
end
return 0
