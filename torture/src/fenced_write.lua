-- The torture suite's fenced resource: a write is accepted only if its fencing token is
-- strictly greater than that of every write accepted before (Kleppmann, "How to do
-- distributed locking", 2016). Check, update and log run in one script: one atomic step.
--
-- KEYS[1]  the resource: a hash with `fence` (token of the last accepted write) and `writes`
-- KEYS[2]  the log: a list of every accepted token, in the order the resource accepted them
-- ARGV[1]  the writer's fencing token (decimal, below 2^53: see examples/demo/fenced_write.lua)
--
-- Returns 1 when the write was accepted, 0 when it was rejected as stale.

local token = tonumber(ARGV[1])
if token == nil or token % 1 ~= 0 or token < 0 or token > 9007199254740991 then
  return redis.error_reply('fenced_write: the fencing token must be an integer in [0, 2^53)')
end

local fence = tonumber(redis.call('HGET', KEYS[1], 'fence') or '-1')
if token <= fence then
  return 0
end

redis.call('HSET', KEYS[1], 'fence', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'writes', 1)
redis.call('RPUSH', KEYS[2], ARGV[1])
return 1
