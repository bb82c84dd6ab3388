-- distlock fencing, put in front of acquire.lua and handover.lua when they are loaded (one
-- definition for both; see lock-redis/src/scripts.rs).
--
-- issue_fence(counter, retention) issues the next fencing token of a name whose counter key
-- is `counter` (same cluster slot as the lock key), kept `retention` milliseconds after the
-- last grant. Returns the token, or nil and the error reply when the counter key holds
-- another type (then nothing was changed).
--
-- Fencing token = max(server time in microseconds, last token + 1).
-- The counter makes tokens strictly increase while it lives, even if the server clock steps
-- back or two grants fall in one microsecond. The clock makes them increase across what the
-- counter does not survive: a restart without persistence, eviction, its retention running out,
-- a failover to a replica that missed the last writes. Nobody can take the lock of one name a
-- million times a second, so the counter never runs ahead of the clock for long.
--
-- The clock's reading is written as seconds followed by six digits of microseconds: string
-- concatenation costs the server ~5,000 fewer instructions per grant than string.format
-- (scripts/script-cost.sh), and a Lua number would be written as 1.7e+15. Tokens stay below
-- 2^53, where Lua's doubles hold every integer exactly.
local function issue_fence(counter, retention)
  local t = redis.call('TIME')
  local fence = t[1] .. string.sub('00000' .. t[2], -6)
  local now = tonumber(fence)
  local last = redis.pcall('SET', counter, fence, 'PX', retention, 'GET')
  if type(last) == 'table' and last.err then
    return nil, last
  end
  last = tonumber(last)
  if last and last >= now then
    now = last + 1
    redis.call('SET', counter, string.format('%.0f', now), 'PX', retention)
  end
  return now
end
