-- One model call's usage, from a[at .. at + 8]: reservation member ('' when none),
-- `<role>|<model>`, input, output, cache_read and cache_write tokens, the configured id the model
-- was requested as ('' when the same), '1' when the usage is an estimate, and the record's
-- operation id (unique per record: a re-send after a lost reply books nothing). It adds to the goal's
-- grand total (`tokens`, what budgets read) and to its `<role>|<model>` counts per kind (the
-- per-kind totals are their sums, at read time), and ends the call's reservation, at once.
-- The counts are read with the goal's other fields and written with them in one HSET: a call's
-- usage is then no command of its own in a move, and two (HMGET, HSET) alone, where an HINCRBY
-- per count made three to five.
local USAGE_KINDS = { 'input', 'output', 'cache_read', 'cache_write' }

-- What the usage adds to the goal hash: `fields` (`tokens`, then each kind it has tokens of)
-- and, at the same index, `adds` (the call's total, then that kind's tokens).
local function usageFields(a, at)
  local u = { fields = { 'tokens' }, adds = { 0 } }
  for i, kind in ipairs(USAGE_KINDS) do
    local n = tonumber(a[at + 1 + i])
    if n and n > 0 then
      table.insert(u.fields, 'usage.' .. a[at + 1] .. '.' .. kind)
      table.insert(u.adds, n)
      u.adds[1] = u.adds[1] + n
    end
  end
  return u
end

-- Appends the usage's new values to `set` (HSET's name, value pairs), given the current value of
-- u.fields[i] at current[offset + i] (false when unset), and ends the call's reservation.
local function usageSet(u, current, offset, a, at, set, reservationsKey)
  for i, field in ipairs(u.fields) do
    if u.adds[i] > 0 then
      table.insert(set, field)
      table.insert(set, string.format('%d', (tonumber(current[offset + i]) or 0) + u.adds[i]))
    end
  end
  if a[at + 6] ~= '' then
    table.insert(set, 'requested.' .. string.match(a[at + 1], '|(.*)$'))
    table.insert(set, a[at + 6])
  end
  if a[at + 7] == '1' then
    table.insert(set, 'estimated.' .. a[at + 1])
    table.insert(set, '1')
  end
  if a[at] ~= '' then redis.call('ZREM', reservationsKey, a[at]) end
end

local USAGE_OPS_KEPT = 16

-- `usageOps` with `op` added, the last USAGE_OPS_KEPT kept: what a re-sent record is checked against.
local function usageOpsWith(ops, op)
  local kept = {}
  for id in string.gmatch(ops or '', '[^|]+') do table.insert(kept, id) end
  table.insert(kept, op)
  while #kept > USAGE_OPS_KEPT do table.remove(kept, 1) end
  return '|' .. table.concat(kept, '|') .. '|'
end

-- addUsage(goalKey, reservationsKey, a, at): the usage on its own. Returns 1, 0 when the goal is
-- gone (nothing is written then: no orphan hash), or 2 for a record already booked (its operation
-- id among the last ones kept in `usageOps`: a re-send after a lost reply), not booked again.
-- A move that carries a usage records its operation id too: the run's transcript, stored again on
-- its own when the move's reply was lost, then books nothing twice.
local function addUsage(goalKey, reservationsKey, a, at)
  local u = usageFields(a, at)
  local current = redis.call('HMGET', goalKey, 'status', 'usageOps', unpack(u.fields))
  if not current[1] then return 0 end
  local op = a[at + 8] or ''
  local ops = current[2] or ''
  if op ~= '' and string.find(ops, '|' .. op .. '|', 1, true) then return 2 end
  local set = {}
  usageSet(u, current, 2, a, at, set, reservationsKey)
  if op ~= '' then
    table.insert(set, 'usageOps')
    table.insert(set, usageOpsWith(ops, op))
  end
  if #set > 0 then redis.call('HSET', goalKey, unpack(set)) end
  return 1
end
