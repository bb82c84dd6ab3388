-- The demo's fenced resource: a write is accepted only if its fencing token is strictly greater
-- than that of every write accepted before (Kleppmann, "How to do distributed locking", 2016).
-- Check and update run in one script, so they are one atomic step on the server.
--
-- KEYS[1]  the resource: a hash with the fields
--            fence   the token of the last accepted write (decimal)
--            writer  who made that write
--            writes  how many writes were accepted
-- ARGV[1]  the writer's fencing token (decimal)
-- ARGV[2]  the writer's name
--
-- Returns 1 when the write was accepted (and stored), 0 when it was rejected as stale.
--
-- tonumber turns the tokens into Lua numbers, which are IEEE doubles. distlock's Redis backend
-- issues tokens of about 1.8e15 (server time in microseconds), below 2^53, where doubles hold
-- every integer exactly, so the comparison is exact. Larger tokens are refused rather than
-- compared inexactly. The token is stored as the caller's decimal string, never as the double
-- (tostring would render it as 1.8e+15).

local token = tonumber(ARGV[1])
if token == nil or token % 1 ~= 0 or token < 0 or token > 9007199254740991 then
  return redis.error_reply('fenced_write: the fencing token must be an integer in [0, 2^53)')
end

-- HGET answers false when the field is absent: a fresh resource accepts any token.
local fence = tonumber(redis.call('HGET', KEYS[1], 'fence') or '-1')
if token <= fence then
  return 0
end

redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'writer', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'writes', 1)
return 1
