-- The hand-written fenced lock's grant (benches/src/handwritten_fenced.rs): SET NX PX, then a
-- fencing token that keeps growing after an empty restart: the larger of the server's TIME in
-- microseconds and the last token + 1, kept under KEYS[2].
-- KEYS[1] the lock, KEYS[2] its counter; ARGV[1] the token, ARGV[2] the TTL in ms.
-- Returns the fencing token, or 0 when the lock is held.
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1] .. string.sub('00000' .. t[2], -6))
local last = tonumber(redis.call('GET', KEYS[2]))
if last and last >= now then now = last + 1 end
redis.call('SET', KEYS[2], string.format('%.0f', now))
return now
