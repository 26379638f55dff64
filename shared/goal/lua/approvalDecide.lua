-- Decides one pending approval: approved, rejected, timeout or cancelled. Only a pending record
-- changes; the decision, its timeline event and the removal from the global pending set land
-- together. A human's decision (approved, rejected) at or after the call's expiresAt is refused
-- and changes nothing: the call is timed out (by the reflector's sweep, or the job's resume).
-- So is a human's decision on a goal that has ended: its calls never run, they are cancelled
-- (releaseApprovals, the job's wake-up or the reconciler); timeout and cancelled still land.
-- Reports what happened, and how many calls of the same job still wait.
-- KEYS[1] goal hash, KEYS[2] approvals hash, KEYS[3] events stream, KEYS[4] global pending zset
-- ARGV[1] call id, ARGV[2] decision, ARGV[3] reason ('' for none), ARGV[4] now (ms), or '' for Redis's clock
-- (a human's decision: the CLI's or browser host's clock may be off; the servers share Redis's)
-- ARGV[5] events max length, ARGV[6] goal id
-- Returns {'no_goal'}, {'no_call'}, {'decided', record} (already decided: the record as it
-- is), {'ended', record, goal status} (a human's decision on an ended goal), {'expired', record}
-- (a human's decision after expiresAt) or {'ok', record, pending calls of its job left}.
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return { 'no_goal' } end
--- @include "includes/terminal.lua"
local raw = redis.call('HGET', KEYS[2], ARGV[1])
if not raw then return { 'no_call' } end
local rec = cjson.decode(raw)
if rec.status ~= 'pending' then return { 'decided', raw } end

local now = tonumber(ARGV[4])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local human = ARGV[2] == 'approved' or ARGV[2] == 'rejected'
if human and terminal[status] then return { 'ended', raw, status } end
if human and now >= tonumber(rec.expiresAt) then return { 'expired', raw } end
rec.status = ARGV[2]
rec.decidedAt = now
if ARGV[3] ~= '' then rec.reason = ARGV[3] end
local updated = cjson.encode(rec)
redis.call('HSET', KEYS[2], ARGV[1], updated)
redis.call('ZREM', KEYS[4], ARGV[6] .. '/' .. ARGV[1])
local event = {
  type = 'approval_decided', step = rec.step, index = rec.index, role = rec.role, threadId = rec.threadId,
  callId = rec.callId, tool = rec.tool, decision = rec.status, at = now,
}
if ARGV[3] ~= '' then event.reason = ARGV[3] end
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 'e', cjson.encode(event))

local left = 0
for _, other in ipairs(redis.call('HVALS', KEYS[2])) do
  local r = cjson.decode(other)
  if r.jobId == rec.jobId and r.status == 'pending' then left = left + 1 end
end
return { 'ok', updated, left }
