-- distlock describe_holder: who holds a mutex (or fair lock), in one atomic read.
--
-- KEYS[1]  the lock key (the holder's plain token)
-- KEYS[2]  the note key (annotate.lua: token '\n' fencing token '\n' note)
-- KEYS[3]  the fencing counter (fence.lua: the last fencing token issued for the name)
--
-- Returns nil when nobody holds the lock. Otherwise {PTTL in ms (-1: no expiry), fencing token
-- (decimal string)} and, when the note key belongs to the holder's token, the note as a third
-- element. The fencing token comes from the holder's own note when it wrote one; else from the
-- fencing counter when the holder is a distlock holder (a 'dl:' token): a fenced grant sets the
-- counter in the same script that sets the key, so the last fence issued is the current
-- holder's. A foreign holder (redis-py, node-redlock) gets 0. A lock key of another type raises
-- WRONGTYPE.
local holder = redis.call('GET', KEYS[1])
if not holder then
  return nil
end
local pttl = redis.call('PTTL', KEYS[1])
local note = redis.call('GET', KEYS[2])
if note then
  -- Plain find (no patterns). Tokens and fencing tokens never hold a newline.
  local token_end = string.find(note, '\n', 1, true)
  if token_end and string.sub(note, 1, token_end - 1) == holder then
    local fence_end = string.find(note, '\n', token_end + 1, true)
    if fence_end then
      return {pttl, string.sub(note, token_end + 1, fence_end - 1), string.sub(note, fence_end + 1)}
    end
  end
end
if string.sub(holder, 1, 3) ~= 'dl:' then
  return {pttl, '0'}
end
return {pttl, redis.call('GET', KEYS[3]) or '0'}
