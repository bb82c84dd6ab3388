-- distlock release: compare-and-delete (safety rule 2), then announce the release to waiters.
-- A stale holder never deletes someone else's lock, and announces nothing.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the lease's token
-- ARGV[2]  the release channel; it hashes to the lock key's slot. It is not declared in KEYS on
--          purpose: a declared key that never exists makes Redis Cluster answer TRYAGAIN while
--          the slot migrates, which would block every release during a resharding.
-- ARGV[3]  optional: the note key, holding the description the grant wrote (same slot, not
--          declared), deleted with it
--
-- PUBLISH_COMMAND is replaced before the script is loaded: by PUBLISH, or by SPUBLISH (sharded
-- pub/sub) on a Redis Cluster. Two scripts rather than an argument saying which: every argument
-- costs the server ~1,500 instructions per call (Lua string and table entry; callgrind).
--
-- The announcement is sent only when a distlock waiter marked that it waits: the key of the
-- same name as the channel (ARGV[2]), set by a busy attempt (acquire.lua, or the client after
-- a busy `SET NX`) and expiring with the holder's lease. One DEL removes the lock and the mark
-- and counts what it removed; a release nobody waits for costs the server no PUBLISH (~5,600
-- instructions of a ~34,000-instruction cycle; scripts/script-cost.sh). Like the channel, the
-- mark is not declared in KEYS: it hashes to the lock key's slot.
--
-- Returns 1 when the lock was ours and is deleted, 0 when it was not ours (left untouched).
--
-- The mark and the holder's description are touched with pcall: while the slot migrates, a key
-- of it that is not on this node makes Redis Cluster refuse the access ("non local key"). The
-- lock is then deleted alone and the release announced, as if someone waited.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  if ARGV[3] then
    redis.pcall('DEL', ARGV[3])
  end
  local deleted = redis.pcall('DEL', KEYS[1], ARGV[2])
  if type(deleted) == 'table' then
    redis.call('DEL', KEYS[1])
    redis.call('PUBLISH_COMMAND', ARGV[2], '')
  elseif deleted == 2 then
    redis.call('PUBLISH_COMMAND', ARGV[2], '')
  end
  return 1
end
return 0
