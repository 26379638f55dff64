-- Stores a job's checkpoint (a pause at a budget, a failed attempt, a resumed turn).
-- KEYS[1] the goal's checkpoints hash
-- ARGV[1] the job id, ARGV[2..] the write (shared/goal/checkpoints.ts CheckpointArgs)
-- Returns 1, or 0 when a partial write was refused (another run's checkpoint is stored).
--- @include "includes/checkpointWrite.lua"
return storeCheckpoint(KEYS[1], ARGV[1], ARGV, 2) and 1 or 0
