-- Adds one model call's token usage to its goal's grand total (`tokens`, what budgets read) and
-- to its `<role>|<model>` counts per kind (the per-kind totals are their sums, at read time),
-- and ends the call's token reservation, at once: a concurrent reservation never sees the
-- reservation gone without its usage counted.
-- KEYS[1] goal hash, KEYS[2] reservations (sorted set)
-- ARGV[1] reservation member ('' when none), ARGV[2] `<role>|<model>`
-- ARGV[3..6] input, output, cache_read, cache_write tokens
-- ARGV[7] the configured model id the response's model was requested as ('' when the same)
-- ARGV[8] '1' when the usage is an estimate (the endpoint reported none)
-- Returns 1, or 0 when the goal is gone (nothing is written then: no orphan hash).
local kinds = { 'input', 'output', 'cache_read', 'cache_write' }
local total = 0
for i = 1, 4 do
  local n = tonumber(ARGV[i + 2])
  if n and n > 0 then total = total + n end
end
-- Whether the goal still exists, without an EXISTS per call: the grand total's HINCRBY answers
-- exactly this call's tokens only for a goal's first usage or a goal that is gone, and only
-- then is its status looked at (a hash the HINCRBY just made is removed again).
if total > 0 then
  if redis.call('HINCRBY', KEYS[1], 'tokens', total) == total and redis.call('HEXISTS', KEYS[1], 'status') == 0 then
    redis.call('DEL', KEYS[1])
    return 0
  end
elseif redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
if ARGV[1] ~= '' then redis.call('ZREM', KEYS[2], ARGV[1]) end
for i, kind in ipairs(kinds) do
  local n = tonumber(ARGV[i + 2])
  if n and n > 0 then redis.call('HINCRBY', KEYS[1], 'usage.' .. ARGV[2] .. '.' .. kind, n) end
end
if ARGV[7] ~= '' then
  local model = string.match(ARGV[2], '|(.*)$')
  redis.call('HSET', KEYS[1], 'requested.' .. model, ARGV[7])
end
if ARGV[8] == '1' then redis.call('HSET', KEYS[1], 'estimated.' .. ARGV[2], '1') end
return 1
