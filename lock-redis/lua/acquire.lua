-- distlock acquire: set the lock only if absent, always with a TTL, and issue its fencing
-- token, in one atomic step (safety rule 1). Requires Redis >= 7.0 (SET ... NX ... GET).
-- fence.lua is put in front of it (issue_fence).
--
-- KEYS[1]  the lock key; its value is the owner's token as a plain string, the layout of
--          redis-py's Lock, node-redlock and redsync, so they and we exclude each other
-- KEYS[2]  the fencing counter (same cluster slot as KEYS[1])
-- ARGV[1]  the token's value: 'dl:' and 32 hex characters (layout.rs, TOKEN_PREFIX)
-- ARGV[2]  TTL in milliseconds
-- ARGV[3]  how long the fencing counter is kept after the last grant, in milliseconds
-- ARGV[4]  optional: the holder's description (JSON, see holder.rs), stored on a grant as the
--          grant's note (annotate.lua's layout: token '\n' fencing token '\n' note) with the
--          same TTL, under the counter's name with 'note' for 'fence' (layout.rs derives both by
--          suffix). The key's own value stays the plain token.
--
-- Returns the fencing token (an integer) when granted, {holder's PTTL in ms, announces} when
-- held (PTTL -1: the key never expires; announces 1 when the holder's value starts with 'dl:',
-- a distlock holder that announces its release, 0 for any other client's). A bare integer on
-- the hot path: the client parses an array reply in ~2,000 more instructions than an integer
-- (scripts/client-cost.sh). A key of another type under KEYS[1] raises WRONGTYPE and is left
-- untouched.

-- With GET, SET answers the current holder's token (not set) or nil (set), and raises WRONGTYPE
-- for a non-string key: one command on both paths.
local holder = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2], 'GET')
if holder then
  local pttl = redis.call('PTTL', KEYS[1])
  if string.sub(holder, 1, 3) ~= 'dl:' then
    return {pttl, 0}
  end
  -- A distlock holder: mark that a waiter waits, so that its release announces itself
  -- (release.lua). The mark is the key named like the release channel: the fencing counter's
  -- name with 'released' for 'fence' (layout.rs derives both by suffix). Its value is the
  -- holder's token, so a native release (DELIFEQ on the mark, kinds/mutex.rs) deletes only
  -- the mark its own waiters left. It lasts the holder's remaining TTL and a second: a waiter
  -- tries again by then, and marks again if still busy.
  -- pcall: while the slot migrates, Redis Cluster refuses a key of it that is not on this node;
  -- the release then announces itself regardless (release.lua).
  if pttl > 0 then
    redis.pcall('SET', string.sub(KEYS[2], 1, -6) .. 'released', holder, 'PX', pttl + 1000)
  end
  return {pttl, 1}
end

local fence, err = issue_fence(KEYS[2], ARGV[3])
if err then
  -- The counter key was overwritten with another type: undo the grant, report, change nothing.
  redis.call('DEL', KEYS[1])
  return err
end
if ARGV[4] then
  -- Best effort (pcall), like the mark: a description refused mid-migration is left out.
  -- The fence as digits: a Lua number would be written as 1.7e+15 (fence.lua).
  local note = ARGV[1] .. '\n' .. string.format('%.0f', fence) .. '\n' .. ARGV[4]
  redis.pcall('SET', string.sub(KEYS[2], 1, -6) .. 'note', note, 'PX', ARGV[2])
end
return fence
