-- distlock acquire: set the lock only if absent, always with a TTL, and issue its fencing
-- token, in one atomic step (safety rule 1). Requires Redis >= 7.0 (SET ... NX ... GET).
--
-- KEYS[1]  the lock key; its value is the owner's token as a plain string, the layout of
--          redis-py's Lock, node-redlock and redsync, so they and we exclude each other
-- KEYS[2]  the fencing counter (same cluster slot as KEYS[1])
-- ARGV[1]  token (32 hex characters)
-- ARGV[2]  TTL in milliseconds
-- ARGV[3]  how long the fencing counter is kept after the last grant, in milliseconds
--
-- Returns {1, fencing token} when granted, {0, holder's PTTL in ms} when held (-1: the key
-- never expires). A key of another type under KEYS[1] raises WRONGTYPE and is left untouched.

-- With GET, SET answers the current holder's token (not set) or nil (set), and raises WRONGTYPE
-- for a non-string key: one command on both paths.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2], 'GET') then
  return {0, redis.call('PTTL', KEYS[1])}
end

-- Fencing token = max(server time in microseconds, last token + 1).
-- The counter makes tokens strictly increase while it lives, even if the server clock steps
-- back or two grants fall in one microsecond. The clock makes them increase across what the
-- counter does not survive: a restart without persistence, eviction, its retention running out,
-- a failover to a replica that missed the last writes. Nobody can take the lock of one name a
-- million times a second, so the counter never runs ahead of the clock for long.
--
-- The clock's reading is written as seconds followed by six digits of microseconds: string
-- concatenation costs the server ~5,000 fewer instructions per grant than string.format
-- (callgrind, see benches/README.md), and a Lua number would be written as 1.7e+15.
local t = redis.call('TIME')
local fence = t[1] .. string.sub('00000' .. t[2], -6)
local now = tonumber(fence)
local last = redis.pcall('SET', KEYS[2], fence, 'PX', ARGV[3], 'GET')
if type(last) == 'table' and last.err then
  -- The counter key was overwritten with another type: undo the grant, report, change nothing.
  redis.call('DEL', KEYS[1])
  return last
end
last = tonumber(last)
if last and last >= now then
  now = last + 1
  redis.call('SET', KEYS[2], string.format('%.0f', now), 'PX', ARGV[3])
end
return {1, now}
