-- distlock release: compare-and-delete (safety rule 2), then announce the release to waiters.
-- A stale holder never deletes someone else's lock, and announces nothing.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the lease's token
-- ARGV[2]  the release channel; it hashes to the lock key's slot. It is not declared in KEYS on
--          purpose: a declared key that never exists makes Redis Cluster answer TRYAGAIN while
--          the slot migrates, which would block every release during a resharding.
--
-- PUBLISH_COMMAND is replaced before the script is loaded: by PUBLISH, or by SPUBLISH (sharded
-- pub/sub) on a Redis Cluster. Two scripts rather than an argument saying which: every argument
-- costs the server ~1,500 instructions per call (Lua string and table entry; callgrind).
--
-- Returns 1 when the lock was ours and is deleted, 0 when it was not ours (left untouched).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH_COMMAND', ARGV[2], '')
  return 1
end
return 0
