-- Deletes a job's checkpoint (includes/checkpointWrite.lua's clearCheckpoint).
-- KEYS[1] the goal's checkpoints hash
-- ARGV[1] the job id
-- Returns how many fields were deleted.
--- @include "includes/checkpointWrite.lua"
return clearCheckpoint(KEYS[1], ARGV[1])
