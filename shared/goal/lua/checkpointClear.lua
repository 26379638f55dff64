-- Deletes a job's checkpoint: its head, its `#n` field and its messages (or the one field of a
-- checkpoint an earlier version stored whole).
-- KEYS[1] the goal's checkpoints hash
-- ARGV[1] the job id
-- Returns how many fields were deleted.
--- @include "includes/checkpointWrite.lua"
local n = checkpointParts(KEYS[1], ARGV[1])
local fields = { ARGV[1], ARGV[1] .. '#h', ARGV[1] .. '#n' }
for i = 0, n - 1 do fields[#fields + 1] = ARGV[1] .. '#' .. i end
return redis.call('HDEL', KEYS[1], unpack(fields))
