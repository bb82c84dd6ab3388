#!lua name=distlock
-- distlock's fenced writes, as a Redis function library (Redis >= 7.0, Valkey). Load it with
--   redis-cli FUNCTION LOAD "$(cat fence_library.lua)"
-- or `distlock migrate`. The same file, without its first line and with a `return` appended,
-- is the EVAL script distlock sends where functions are unavailable (lock-redis/src/fences/).
--
-- The contract (stable across versions; the version below only ever grows):
--   FCALL distlock_fenced_set 1 KEY TOKEN VALUE [PX ms]  -> OK
--   FCALL distlock_fenced_del 1 KEY TOKEN                -> 1 deleted, 0 absent
--   FCALL_RO distlock_version 0                          -> this library's version
-- A write applies iff TOKEN >= the largest token KEY accepted (equal is accepted), and raises
-- that record in the same atomic step. A smaller TOKEN is refused with an error whose text is
--   STALEFENCE token <TOKEN> < accepted <RECORDED> for <KEY>
-- and nothing changes.
--
-- The record of KEY (a string key holding the largest accepted token in decimal, no TTL: it
-- must outlive every value it fences) lives in KEY's cluster slot:
--   KEY has a hash tag T (the first '{', then the first '}' after it, T not empty):
--       {T}:distlock-accepted:KEY
--   otherwise:
--       {KEY}:distlock-accepted
-- A KEY without a hash tag that is empty or contains '}' is refused (no record of that form
-- would share its slot): give it a hash tag.
--
-- Tokens are decimal integers in [0, 2^53): Lua numbers are doubles, exact below 2^53, and
-- distlock's Redis tokens (server time in microseconds) are about 1.8e15.

local VERSION = 1
local SUFFIX = ':distlock-accepted'

-- The record key of `key`, or nil and the reason when `key` cannot have one.
local function record_of(key)
  local open = string.find(key, '{', 1, true)
  if open then
    local close = string.find(key, '}', open + 1, true)
    if close and close > open + 1 then
      return '{' .. string.sub(key, open + 1, close - 1) .. '}' .. SUFFIX .. ':' .. key
    end
  end
  if key == '' or string.find(key, '}', 1, true) then
    return nil, 'ERR distlock: the key is empty or has a } without a hash tag; give it a hash tag {...}'
  end
  return '{' .. key .. '}' .. SUFFIX
end

-- The token as a number, or nil when `text` is not a decimal integer in [0, 2^53) written
-- without leading zeros (so that equal tokens are equal texts).
local function token_of(text)
  if type(text) ~= 'string' or #text > 16 or not string.find(text, '^[1-9]%d*$') then
    if text == '0' then
      return 0
    end
    return nil
  end
  local token = tonumber(text)
  if token > 9007199254740991 then
    return nil
  end
  return token
end

-- Checks `text` against the record of `key` and raises the record to it, in one step:
-- nil when the write may go on, an error reply (a table) when it may not; then nothing changed.
local function fence(key, text)
  if not key then
    return redis.error_reply('ERR distlock: no key given (numkeys must be at least 1)')
  end
  if string.find(key, SUFFIX, -#SUFFIX, true) then
    return redis.error_reply('ERR distlock: the key ends like a fence record (' .. SUFFIX .. ')')
  end
  local token = token_of(text)
  if not token then
    return redis.error_reply('ERR distlock: the fencing token must be a decimal integer in [0, 2^53) without leading zeros')
  end
  local record, why = record_of(key)
  if not record then
    return redis.error_reply(why)
  end
  -- One command on the accepted path: SET ... GET answers the previous record (and raises
  -- WRONGTYPE, changing nothing, when the record is not a string).
  local recorded = redis.call('SET', record, text, 'GET')
  if recorded then
    -- tonumber, not token_of: the record holds what an accepted write wrote (nil: tampered).
    local current = tonumber(recorded)
    if not current or token < current then
      -- Put the record back: the script is one atomic step, nobody saw the interim value.
      redis.call('SET', record, recorded)
      if not current then
        return redis.error_reply('ERR distlock: the fence record ' .. record .. ' holds no token')
      end
      return redis.error_reply('STALEFENCE token ' .. text .. ' < accepted ' .. recorded .. ' for ' .. key)
    end
  end
  return nil
end

-- The PX argument pair at args[i], args[i + 1]: nil (absent), or the SET arguments, or an error.
local function expiry(args, i)
  if args[i] == nil then
    return nil
  end
  local ms = args[i + 1]
  if string.upper(args[i]) ~= 'PX' or args[i + 2] ~= nil or type(ms) ~= 'string'
      or not string.match(ms, '^%d+$') or #ms > 15 or tonumber(ms) < 1 then
    return nil, redis.error_reply('ERR distlock: after VALUE only PX <milliseconds, at least 1> may follow')
  end
  return ms
end

local function fenced_set(keys, args)
  if args[2] == nil then
    return redis.error_reply('ERR distlock: distlock_fenced_set 1 KEY TOKEN VALUE [PX ms]')
  end
  local ms, bad = expiry(args, 3)
  if bad then
    return bad
  end
  local refused = fence(keys[1], args[1])
  if refused then
    return refused
  end
  if ms then
    return redis.call('SET', keys[1], args[2], 'PX', ms)
  end
  return redis.call('SET', keys[1], args[2])
end

local function fenced_del(keys, args)
  if args[2] ~= nil then
    return redis.error_reply('ERR distlock: distlock_fenced_del 1 KEY TOKEN')
  end
  local refused = fence(keys[1], args[1])
  if refused then
    return refused
  end
  return redis.call('DEL', keys[1])
end

-- Only when loaded with FUNCTION LOAD; the EVAL scripts made of this file skip it.
if redis.register_function then
  redis.register_function{function_name = 'distlock_version', callback = function() return VERSION end, flags = {'no-writes'}}
  redis.register_function('distlock_fenced_set', fenced_set)
  redis.register_function('distlock_fenced_del', fenced_del)
end
