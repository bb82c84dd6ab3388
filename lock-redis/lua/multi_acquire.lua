-- distlock multi acquire: set several lock keys with one token, all or none, in one atomic step,
-- each with its own fencing token. fence.lua is put in front of it. All keys are in one cluster
-- slot (the caller takes names across slots one by one instead).
--
-- KEYS[1..n]     the lock keys (each the mutex of one name, the layout of acquire.lua)
-- KEYS[n+1..2n]  their fencing counters, in the same order (absent without fencing)
-- ARGV[1]  the token's value ('dl:' and 32 hex characters)
-- ARGV[2]  TTL in milliseconds
-- ARGV[3]  how long the fencing counters are kept, in milliseconds ('' without fencing)
-- ARGV[4]  n, the number of lock keys
--
-- Returns {1, fencing token of each key in order (0 without fencing)...} when granted;
-- {0, index (0-based) of the first held key, its PTTL, announces, its holder's token} when any
-- key is held (nothing is changed); the client marks that it waits with that token (see
-- acquire.lua). A key of another type raises WRONGTYPE before anything is written.
local n = tonumber(ARGV[4])
for i = 1, n do
  local holder = redis.call('GET', KEYS[i])
  if holder then
    return {0, i - 1, redis.call('PTTL', KEYS[i]), string.sub(holder, 1, 3) == 'dl:' and 1 or 0, holder}
  end
end
local answer = {1}
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  local fence = 0
  if ARGV[3] ~= '' then
    local err
    fence, err = issue_fence(KEYS[n + i], ARGV[3])
    if err then
      for j = 1, i do
        redis.call('DEL', KEYS[j])
      end
      return err
    end
  end
  answer[i + 1] = fence
end
return answer
