-- Moves a goal to a new status atomically, never out of a terminal status.
-- KEYS[1] goal hash, KEYS[2] events stream
-- ARGV[1] allowed current statuses, comma-separated, or '*' for any non-terminal
-- ARGV[2] new status ('' keeps the status and only sets fields)
-- ARGV[3] now (ms), ARGV[4] fields as JSON object
-- ARGV[5] events: JSON objects, one per line ('' for none); all land with the move or none do
-- ARGV[6] events max length, ARGV[7] key TTL seconds
-- Returns the previous status, or false when the move was refused.
local cur = redis.call('HGET', KEYS[1], 'status')
if not cur then return false end
local terminal = { done = true, failed = true, cancelled = true, budget_exceeded = true }
if terminal[cur] then return false end
if ARGV[1] ~= '*' then
  local ok = false
  for s in string.gmatch(ARGV[1], '([^,]+)') do
    if s == cur then ok = true end
  end
  if not ok then return false end
end
if ARGV[2] ~= '' then
  redis.call('HSET', KEYS[1], 'status', ARGV[2])
  if terminal[ARGV[2]] then redis.call('HSET', KEYS[1], 'finishedAt', ARGV[3]) end
end
redis.call('HSET', KEYS[1], 'updatedAt', ARGV[3])
local fields = cjson.decode(ARGV[4])
for k, v in pairs(fields) do
  redis.call('HSET', KEYS[1], k, tostring(v))
end
for event in string.gmatch(ARGV[5], '[^\n]+') do
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[6], '*', 'e', event)
end
local ttl = tonumber(ARGV[7])
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('EXPIRE', KEYS[2], ttl)
return cur
