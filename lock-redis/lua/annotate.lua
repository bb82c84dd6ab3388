-- distlock annotate: write a note beside a mutex (or fair) grant, only while the grant's token
-- holds the lock (safety rule 2: a stale holder never writes over a later holder's note).
--
-- KEYS[1]  the lock key (its value, the plain token, is never changed)
-- KEYS[2]  the note key (layout.rs NOTE_SUFFIX, same cluster slot)
-- ARGV[1]  the lease's token ('dl:' and 32 hex characters)
-- ARGV[2]  the lease's fencing token (decimal; 0 without fencing)
-- ARGV[3]  the note (any bytes)
-- ARGV[4]  how long the note is kept, in milliseconds: the fencing counter's retention, so that
--          renewals (extend.lua, SET IFEQ) need not touch it. The token in front of the note
--          keeps a note that outlives its grant from ever being shown with a later one
--          (describe_holder.lua).
--
-- Returns 1 when written, 0 when the lock was not held with ARGV[1] (nothing written). A lock
-- key of another type raises WRONGTYPE.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[2], ARGV[1] .. '\n' .. ARGV[2] .. '\n' .. ARGV[3], 'PX', ARGV[4])
return 1
