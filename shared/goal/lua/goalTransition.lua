-- Moves a goal to a new status atomically, never out of a terminal status. Safe to run twice:
-- a reply lost on the way back makes ioredis send the same call again after it reconnects,
-- and a call whose operation id is already recorded returns success without acting again.
-- KEYS[1] goal hash, KEYS[2] events stream, KEYS[3] files hash, KEYS[4] content hash,
-- KEYS[5] live goals (a goal that ends leaves it), KEYS[6] a transcript's key, KEYS[7] the goal's
-- threads, KEYS[8] the goal's token reservations, KEYS[9] the goal's artifact history (revised
-- versions: kept, and expiring, with the goal's other keys), KEYS[10] ended goals (a goal that ends
-- joins it, scored by when: the sweep's retention reads it)
-- ARGV[1] allowed current statuses, comma-separated, or '*' for any non-terminal
-- ARGV[2] new status ('' keeps the status and only sets fields)
-- ARGV[3] now (ms), ARGV[4] goal id
-- ARGV[5] events: JSON objects, one per line ('' for none); all land with the move or none do
-- ARGV[6] events max length, ARGV[7] key TTL seconds, or `<TTL>:<seconds a goal's keys must last
-- after it ends>` (its retention: the sweep removes it then; an end renews to it if it is the
-- longer); with the TTL alone, the end always sets the TTL
-- ARGV[8] operation id (unique per call)
-- ARGV[9] a field that records the status the move left (a budget pause's `pausedFrom`), or ''
-- ARGV[10] what the call reads with the move, as letters: 'f' the goal's files index (the hash at
-- KEYS[3]) with a move that is made; 'g' the whole goal hash as it was before the move, made or
-- refused (a job's start reads nothing else). The letters (none too) may carry a guard on the
-- goal's cycle, `<letters>:<min step>:<max step>:<max planStep>`: outside it the move is refused
-- (a stale delivery). Last, `#<n>` guards a human's answer to a pause: the move only while the
-- goal is in its n-th pause (the `pauses` field, counted by every move into awaiting_human), so
-- an answer read before another human's resume, and the pause after it, is refused.
-- With 'g' a refused move returns {'', '', {}, goal}; a missing goal still returns false.
-- ARGV[11] how many arguments of a transcript follow (0, 7 or 16): the run that decided the move,
-- stored with it (transcriptSave.lua's ARGV[1..7], then its last call's usage, ARGV[8..16])
-- ARGV[12 + that ..] the fields to set: name, value, name, value, ... (flat: no JSON to decode here)
-- Returns {previous status (the current one on a replay), the goal's step after the move, with
-- 'f' the files index as flat name, entry pairs (not on a replay; else {}), with 'g' the goal as
-- flat field, value pairs}, or false when the move was refused.
--- @include "includes/addUsage.lua"
--- @include "../../agent/lua/includes/saveTranscript.lua"
local OPS_KEPT = 16
local wantsGoal = string.sub(ARGV[10], 1, 1) == 'g'
local wantsFiles = string.find(ARGV[10], 'f', 1, true) ~= nil
local transcriptArgs = tonumber(ARGV[11]) or 0
-- The deciding run's last call's usage is read with the goal's fields and set in the move's HSET.
local usage = nil
if transcriptArgs > 7 and ARGV[20] ~= '' then usage = usageFields(ARGV, 19) end
-- Read with the goal's fields: the usage's counts, then the usage records booked lately.
local usageRead = {}
for i, f in ipairs(usage and usage.fields or {}) do usageRead[i] = f end
if usage then table.insert(usageRead, 'usageOps') end
local h, snapshot
if wantsGoal then
  snapshot = redis.call('HGETALL', KEYS[1])
  local m = {}
  for i = 1, #snapshot, 2 do m[snapshot[i]] = snapshot[i + 1] end
  h = { m.status, m.ops, m.ttlAt, m.step, m.planStep }
  for i, f in ipairs(usageRead) do h[5 + i] = m[f] or false end
else
  h = redis.call('HMGET', KEYS[1], 'status', 'ops', 'ttlAt', 'step', 'planStep', unpack(usageRead))
end
local cur = h[1]
if not cur then return false end
local refused = false
if wantsGoal then refused = { '', '', {}, snapshot } end
local ops = h[2] or ''
if string.find(ops, '|' .. ARGV[8] .. '|', 1, true) then
  if wantsGoal then
    local files = {}
    if wantsFiles then files = redis.call('HGETALL', KEYS[3]) end
    return { cur, h[4] or '0', files, snapshot }
  end
  return { cur, h[4] or '0' }
end
--- @include "includes/terminal.lua"
if terminal[cur] then return refused end
if ARGV[1] ~= '*' then
  local ok = false
  for s in string.gmatch(ARGV[1], '([^,]+)') do
    if s == cur then ok = true end
  end
  if not ok then return refused end
end
local minStep, maxStep, maxPlanStep = string.match(ARGV[10], '^%a*:(%d+):(%d+):(%d+)')
if minStep then
  local step, planStep = tonumber(h[4] or '0'), tonumber(h[5] or '0')
  if step < tonumber(minStep) or step > tonumber(maxStep) or planStep > tonumber(maxPlanStep) then return refused end
end
local pauseGuard = string.match(ARGV[10], '#(%d+)$')
local pauses = nil
if pauseGuard or (ARGV[2] == 'awaiting_human' and cur ~= 'awaiting_human') then
  pauses = tonumber(redis.call('HGET', KEYS[1], 'pauses') or '0')
  if pauseGuard and pauses ~= tonumber(pauseGuard) then return refused end
end
-- Every field in one HSET: a move is a handful of commands, not one per field.
local set = { 'updatedAt', ARGV[3] }
local status = cur
if ARGV[2] ~= '' then
  status = ARGV[2]
  table.insert(set, 'status')
  table.insert(set, status)
  if terminal[status] then
    table.insert(set, 'finishedAt')
    table.insert(set, ARGV[3])
  end
end
local firstField = 12 + transcriptArgs
local step = h[4] or '0'
for i = firstField, #ARGV do table.insert(set, ARGV[i]) end
for i = firstField, #ARGV - 1, 2 do
  if ARGV[i] == 'step' then step = ARGV[i + 1] end
end
if ARGV[2] == 'awaiting_human' and cur ~= 'awaiting_human' then
  table.insert(set, 'pauses')
  table.insert(set, tostring(pauses + 1))
end
if ARGV[9] and ARGV[9] ~= '' then
  table.insert(set, ARGV[9])
  table.insert(set, cur)
end
-- A goal awaiting a human keeps its keys (the TTL is a backstop for abandoned work, not a
-- deadline for a person). Otherwise the backstop is set again once less than half of it is left,
-- or when the goal ends with less left than the goal is kept after its end. `ttlAt` says when the
-- keys expire (0 while kept without a TTL; none on goals stored before it existed, and on older
-- goals the time it was set: both renew at once), so no TTL read is needed, and a TTL set by a
-- process configured with another one is judged by what is really left.
local now = tonumber(ARGV[3])
local ttlArg, keptArg = string.match(ARGV[7], '^(%d+):?(%d*)$')
local ttl = tonumber(ttlArg)
local keptAfterEnd = tonumber(keptArg) or ttl
local left = (tonumber(h[3]) or 0) - now
local keys = nil
if status == 'awaiting_human' then
  keys = 'PERSIST'
  table.insert(set, 'ttlAt')
  table.insert(set, '0')
elseif (terminal[status] and left < keptAfterEnd * 1000) or left <= ttl * 500 then
  keys = 'EXPIRE'
  -- An ended goal's keys last as long as it is kept after its end, if that is the longer.
  if terminal[status] then ttl = math.max(ttl, keptAfterEnd) end
  table.insert(set, 'ttlAt')
  table.insert(set, tostring(now + ttl * 1000))
end
if usage then
  usageSet(usage, h, 5, ARGV, 19, set, KEYS[8])
  -- Its operation id: the transcript stored again on its own (this reply lost) books it once.
  if ARGV[27] and ARGV[27] ~= '' then
    table.insert(set, 'usageOps')
    table.insert(set, usageOpsWith(h[5 + #usageRead] or '', ARGV[27]))
  end
end
-- Remember the last few operation ids: enough for any re-send, bounded in size.
local kept = {}
for id in string.gmatch(ops, '[^|]+') do table.insert(kept, id) end
table.insert(kept, ARGV[8])
while #kept > OPS_KEPT do table.remove(kept, 1) end
table.insert(set, 'ops')
table.insert(set, '|' .. table.concat(kept, '|') .. '|')
redis.call('HSET', KEYS[1], unpack(set))
for event in string.gmatch(ARGV[5], '[^\n]+') do
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[6], '*', 'e', event)
end
if terminal[status] then
  redis.call('ZREM', KEYS[5], ARGV[4])
  redis.call('ZADD', KEYS[10], ARGV[3], ARGV[4])
end
if transcriptArgs > 0 then
  saveTranscript(KEYS[6], KEYS[7], ARGV, 12)
end
if keys == 'PERSIST' then
  for i = 1, 4 do redis.call('PERSIST', KEYS[i]) end
  redis.call('PERSIST', KEYS[7])
  redis.call('PERSIST', KEYS[9])
elseif keys == 'EXPIRE' then
  for i = 1, 4 do redis.call('EXPIRE', KEYS[i], ttl) end
  -- The threads index and the history too: writes set their TTL only when they make them.
  redis.call('EXPIRE', KEYS[7], ttl)
  redis.call('EXPIRE', KEYS[9], ttl)
end
-- A job that starts work on the goal reads its files next: they come with the move.
local files = {}
if wantsFiles then files = redis.call('HGETALL', KEYS[3]) end
if wantsGoal then return { cur, step, files, snapshot } end
if wantsFiles then return { cur, step, files } end
return { cur, step }
