-- distlock handover: pass a held lock on to the next holder in one atomic step — the stored
-- token becomes the next holder's, with a fresh TTL and a fresh fencing token — if it is still
-- the releasing lease's (safety rule 2: a stale holder changes nothing). Used when a guard is
-- released while another task of the same process waits for the name: one command instead
-- of a release, an announcement and an acquire, and no contender can slip in between.
-- fence.lua is put in front of it (issue_fence).
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter (same cluster slot); absent when the lock issues no tokens
-- ARGV[1]  the releasing lease's token
-- ARGV[2]  the next holder's token
-- ARGV[3]  the next holder's TTL in milliseconds
-- ARGV[4]  the waiting mark (same slot, not declared: see release.lua)
-- ARGV[5]  how long the fencing counter is kept, in milliseconds (with KEYS[2])
-- ARGV[6]  optional (with KEYS[2]): the next holder's description, written as its grant's
--          note over the releasing holder's (see acquire.lua)
--
-- Returns {1, fencing token (0 without KEYS[2])} when handed over, {0, 0} when the lock was no
-- longer the releasing lease's (left untouched). A key of another type raises WRONGTYPE.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {0, 0}
end
local fence = 0
if KEYS[2] then
  local err
  fence, err = issue_fence(KEYS[2], ARGV[5])
  if err then
    return err
  end
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
-- The waiting mark holds the token of the holder its waiters found busy (acquire.lua); it
-- passes on with the lock, so that the next holder's native release, which deletes only a
-- mark holding its own token (DELIFEQ, kinds/mutex.rs), still finds those waiters' mark and
-- announces. Best effort (pcall), like the mark itself: a waiter that is not announced to
-- tries again within the holder's TTL.
if redis.pcall('GET', ARGV[4]) == ARGV[1] then
  redis.pcall('SET', ARGV[4], ARGV[2], 'KEEPTTL')
end
if ARGV[6] and KEYS[2] then
  -- Best effort (pcall): see acquire.lua.
  local note = ARGV[2] .. '\n' .. string.format('%.0f', fence) .. '\n' .. ARGV[6]
  redis.pcall('SET', string.sub(KEYS[2], 1, -6) .. 'note', note, 'PX', ARGV[3])
end
return {1, fence}
