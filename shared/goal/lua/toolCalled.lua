-- A tool call's end, in one script: its `tool_called` event, the usage of the model call that
-- asked for it when that usage is not booked yet (where an XADD and usageAdd.lua were two
-- requests), and the run's progress: its checkpoint after this call, so that a job handed out
-- again after its process died goes on from here instead of running every tool again.
-- KEYS[1] goal hash, KEYS[2] the goal's token reservations, KEYS[3] the goal's events stream,
-- KEYS[4] the goal's checkpoints hash, KEYS[5] the job's lock
-- ARGV[1] the event (JSON), ARGV[2] events max length, ARGV[3] '1' when the usage is given,
-- ARGV[4] the checkpoint's job id ('' for none), ARGV[5] the job's lock token,
-- ARGV[6] the checkpoints hash's TTL (seconds, set when it has none),
-- ARGV[7..15] the call's usage (usageAdd.lua's ARGV[1..9]; any 9 values when not given),
-- ARGV[16..] the checkpoint's write (shared/goal/checkpoints.ts CheckpointArgs)
-- Returns 1; 3 when the checkpoint was not stored (the lock is not the run's, or a partial
-- write found another run's checkpoint); 0 when the goal is gone (nothing is written then: no
-- orphan keys). A re-send of a call that landed (a lost reply: its usage is booked already)
-- appends no second event. A run another worker took over (its lock lost) never overwrites the
-- new run's progress.
--- @include "includes/addUsage.lua"
--- @include "includes/checkpointWrite.lua"
if ARGV[3] == '1' then
  local booked = addUsage(KEYS[1], KEYS[2], ARGV, 7)
  if booked == 0 then return 0 end
  if booked ~= 2 then redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[2], '*', 'e', ARGV[1]) end
else
  if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[2], '*', 'e', ARGV[1])
end
if ARGV[4] == '' then return 1 end
return storeUnderLock(KEYS[4], ARGV[4], KEYS[5], ARGV[5], ARGV[6], ARGV, 16)
