-- Records that a paused subagent job waits for human decisions: its checkpoint, one pending
-- record per call, a timeline event per call, and each call in the global pending set. All or
-- nothing, and idempotent per job: while the job already has pending calls (the reply of an
-- earlier run of this script was lost, or the job was delivered again), nothing is added and
-- the existing pending call ids are returned instead.
-- KEYS[1] goal hash, KEYS[2] approvals hash, KEYS[3] checkpoints hash, KEYS[4] events stream,
-- KEYS[5] global pending zset, KEYS[6] files hash, KEYS[7] content hash, KEYS[8] threads zset,
-- KEYS[9] artifact history hash
-- ARGV[1] job id
-- ARGV[2] records: JSON objects, one per line, each with callId and expiresAt
-- ARGV[3] events: JSON objects, one per line, ARGV[4] events max length
-- ARGV[5] key TTL seconds (refreshed on every key of the goal, and `ttlAt` with them), ARGV[6] goal id
-- ARGV[7..] the checkpoint's write, whole (shared/goal/checkpoints.ts CheckpointArgs)
-- Returns {'ok'}, {'waiting', callId...}, {'terminal', status} or {'gone'}.
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return { 'gone' } end
--- @include "includes/terminal.lua"
--- @include "includes/checkpointWrite.lua"
if terminal[status] then return { 'terminal', status } end

local waiting = { 'waiting' }
for _, raw in ipairs(redis.call('HVALS', KEYS[2])) do
  local rec = cjson.decode(raw)
  if rec.jobId == ARGV[1] and rec.status == 'pending' then table.insert(waiting, rec.callId) end
end
if #waiting > 1 then return waiting end

storeCheckpoint(KEYS[3], ARGV[1], ARGV, 7)
for line in string.gmatch(ARGV[2], '[^\n]+') do
  local rec = cjson.decode(line)
  redis.call('HSET', KEYS[2], rec.callId, line)
  redis.call('ZADD', KEYS[5], rec.expiresAt, ARGV[6] .. '/' .. rec.callId)
end
for event in string.gmatch(ARGV[3], '[^\n]+') do
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[4], '*', 'e', event)
end
-- The approval timeout is shorter than the key TTL (checked in config): refreshed now, no
-- key of the goal can expire while a call waits. A goal awaiting a human (paused at its budget
-- while this call came) keeps its keys without a TTL, as its move left them: not given one back.
local persisted = status == 'awaiting_human'
for i = 1, 9 do
  local kept = persisted and (i == 1 or i == 4 or i == 6 or i == 7 or i == 8 or i == 9)
  if i ~= 5 and not kept then redis.call('EXPIRE', KEYS[i], ARGV[5]) end
end
-- The goal's moves judge a renewal by `ttlAt`: it says when the keys now expire.
if not persisted then
  local t = redis.call('TIME')
  local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('HSET', KEYS[1], 'ttlAt', tostring(nowMs + ARGV[5] * 1000))
end
return { 'ok' }
