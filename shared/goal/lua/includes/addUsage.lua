-- addUsage(goalKey, reservationsKey, a, at): one model call's usage, from a[at .. at + 7]:
-- reservation member ('' when none), `<role>|<model>`, input, output, cache_read and
-- cache_write tokens, the configured id the model was requested as ('' when the same), '1'
-- when the usage is an estimate. Adds it to the goal's grand total (`tokens`, what budgets
-- read) and to its `<role>|<model>` counts per kind (the per-kind totals are their sums, at read
-- time), and ends the call's reservation, at once. Returns 1, or 0 when the goal is gone
-- (nothing is written then: no orphan hash).
local function addUsage(goalKey, reservationsKey, a, at)
  local kinds = { 'input', 'output', 'cache_read', 'cache_write' }
  local total = 0
  for i = 1, 4 do
    local n = tonumber(a[at + 1 + i])
    if n and n > 0 then total = total + n end
  end
  -- Whether the goal still exists, without an EXISTS per call: the grand total's HINCRBY
  -- answers exactly this call's tokens only for a goal's first usage or a goal that is gone,
  -- and only then is its status looked at (a hash the HINCRBY just made is removed again).
  if total > 0 then
    if redis.call('HINCRBY', goalKey, 'tokens', total) == total and redis.call('HEXISTS', goalKey, 'status') == 0 then
      redis.call('DEL', goalKey)
      return 0
    end
  elseif redis.call('EXISTS', goalKey) == 0 then
    return 0
  end
  local key = a[at + 1]
  if a[at] ~= '' then redis.call('ZREM', reservationsKey, a[at]) end
  for i, kind in ipairs(kinds) do
    local n = tonumber(a[at + 1 + i])
    if n and n > 0 then redis.call('HINCRBY', goalKey, 'usage.' .. key .. '.' .. kind, n) end
  end
  if a[at + 6] ~= '' then
    local model = string.match(key, '|(.*)$')
    redis.call('HSET', goalKey, 'requested.' .. model, a[at + 6])
  end
  if a[at + 7] == '1' then redis.call('HSET', goalKey, 'estimated.' .. key, '1') end
  return 1
end
