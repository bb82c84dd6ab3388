-- distlock describe_holder: who holds a mutex (or fair lock), in one atomic read. The reply is
-- decoded by holder.rs (`HolderReplies`), the one reader of holder descriptions, which
-- `distlock ls`/`show` also use on the same keys read in a pipeline.
--
-- KEYS[1]  the lock key (the holder's plain token)
-- KEYS[2]  the note key (annotate.lua: token '\n' fencing token '\n' note; the description a
--          grant writes with holder metadata has the same layout)
-- KEYS[3]  the fencing counter (fence.lua: the last fencing token issued for the name)
--
-- Returns nil when nobody holds the lock. Otherwise {the holder's token, PTTL in ms (-1: no
-- expiry), the note key's value, the fencing counter's value}, each of the last two nil
-- (false) when absent. A lock key of another type raises WRONGTYPE.
local holder = redis.call('GET', KEYS[1])
if not holder then
  return nil
end
return {
  holder,
  redis.call('PTTL', KEYS[1]),
  redis.call('GET', KEYS[2]),
  redis.call('GET', KEYS[3]),
}
