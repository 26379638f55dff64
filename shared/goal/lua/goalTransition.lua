-- Moves a goal to a new status atomically, never out of a terminal status. Safe to run twice:
-- a reply lost on the way back makes ioredis send the same call again after it reconnects,
-- and a call whose operation id is already recorded returns success without acting again.
-- KEYS[1] goal hash, KEYS[2] events stream, KEYS[3] files hash, KEYS[4] content hash
-- ARGV[1] allowed current statuses, comma-separated, or '*' for any non-terminal
-- ARGV[2] new status ('' keeps the status and only sets fields)
-- ARGV[3] now (ms), ARGV[4] fields as JSON object
-- ARGV[5] events: JSON objects, one per line ('' for none); all land with the move or none do
-- ARGV[6] events max length, ARGV[7] key TTL seconds
-- ARGV[8] operation id (unique per call)
-- ARGV[9] optional: a field that records the status the move left (a budget pause's `pausedFrom`)
-- Returns the previous status (the current one on a replay), or false when the move was refused.
local OPS_KEPT = 16
local cur = redis.call('HGET', KEYS[1], 'status')
if not cur then return false end
local ops = redis.call('HGET', KEYS[1], 'ops') or ''
if string.find(ops, '|' .. ARGV[8] .. '|', 1, true) then return cur end
local terminal = { done = true, failed = true, cancelled = true, budget_exceeded = true }
if terminal[cur] then return false end
if ARGV[1] ~= '*' then
  local ok = false
  for s in string.gmatch(ARGV[1], '([^,]+)') do
    if s == cur then ok = true end
  end
  if not ok then return false end
end
local status = cur
if ARGV[2] ~= '' then
  status = ARGV[2]
  redis.call('HSET', KEYS[1], 'status', status)
  if terminal[status] then redis.call('HSET', KEYS[1], 'finishedAt', ARGV[3]) end
end
redis.call('HSET', KEYS[1], 'updatedAt', ARGV[3])
local fields = cjson.decode(ARGV[4])
for k, v in pairs(fields) do
  redis.call('HSET', KEYS[1], k, tostring(v))
end
if ARGV[9] and ARGV[9] ~= '' then redis.call('HSET', KEYS[1], ARGV[9], cur) end
for event in string.gmatch(ARGV[5], '[^\n]+') do
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[6], '*', 'e', event)
end
-- Remember the last few operation ids: enough for any re-send, bounded in size.
local kept = {}
for id in string.gmatch(ops, '[^|]+') do table.insert(kept, id) end
table.insert(kept, ARGV[8])
while #kept > OPS_KEPT do table.remove(kept, 1) end
redis.call('HSET', KEYS[1], 'ops', '|' .. table.concat(kept, '|') .. '|')
-- A goal awaiting a human keeps its keys (the TTL is a backstop for abandoned work, not a
-- deadline for a person); any other move sets the backstop again.
local ttl = tonumber(ARGV[7])
for i = 1, 4 do
  if status == 'awaiting_human' then
    redis.call('PERSIST', KEYS[i])
  else
    redis.call('EXPIRE', KEYS[i], ttl)
  end
end
return cur
