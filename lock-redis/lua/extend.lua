-- distlock extend: compare-and-pexpire (safety rule 2). A stale holder never extends someone
-- else's lock.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the lease's token
-- ARGV[2]  the new TTL in milliseconds, counted from now
-- ARGV[3]  optional: the note key, holding the description the grant wrote (same slot; not
--          declared, like the release channel in release.lua), which then expires with the lease
--
-- Returns 1 when the lock was ours and now expires ARGV[2] ms from now, 0 when it was not ours.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  if ARGV[3] then
    -- Best effort (pcall): see acquire.lua.
    redis.pcall('PEXPIRE', ARGV[3], ARGV[2])
  end
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
