-- Reads a job's checkpoint whole, in one step: its head, then its messages in order.
-- KEYS[1] the goal's checkpoints hash
-- ARGV[1] the job id
-- Returns {} when the job has none; {checkpoint} for one an earlier version stored whole.
--- @include "includes/checkpointWrite.lua"
local head = redis.call('HGET', KEYS[1], ARGV[1] .. '#h')
if not head then
  local whole = redis.call('HGET', KEYS[1], ARGV[1])
  if whole then return { whole } end
  return {}
end
local n = checkpointParts(KEYS[1], ARGV[1])
local reply = { head }
if n == 0 then return reply end
local fields = {}
for i = 0, n - 1 do fields[#fields + 1] = ARGV[1] .. '#' .. i end
for i, m in ipairs(redis.call('HMGET', KEYS[1], unpack(fields))) do reply[i + 1] = m end
return reply
