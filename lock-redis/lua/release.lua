-- distlock release: compare-and-delete (safety rule 2). A stale holder never deletes someone
-- else's lock.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the lease's token
--
-- Returns 1 when the lock was ours and is deleted, 0 when it was not ours (left untouched).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
