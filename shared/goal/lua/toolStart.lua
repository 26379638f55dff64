-- A call of an at-most-once tool is about to go out: the run's checkpoint marking it started is
-- stored first (while the job's lock is the run's), so that a start after the run's process
-- died does not run the call again (its outcome is unknown: the model is told so instead).
-- KEYS[1] goal hash, KEYS[2] the goal's checkpoints hash, KEYS[3] the job's lock
-- ARGV[1] the checkpoint's job id, ARGV[2] the job's lock token,
-- ARGV[3] the checkpoints hash's TTL (seconds, set when it has none),
-- ARGV[4..] the checkpoint's write (shared/goal/checkpoints.ts CheckpointArgs)
-- Returns 1; 3 when it was not stored (the lock is not the run's, or a partial write found
-- another run's checkpoint); 0 when the goal is gone (nothing is written: no orphan keys).
--- @include "includes/checkpointWrite.lua"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
return storeUnderLock(KEYS[2], ARGV[1], KEYS[3], ARGV[2], ARGV[3], ARGV, 4)
