-- Takes a woken job off its goal's parked list, only as the waker read it: a job that parked
-- again meanwhile (its goal paused again) has a new entry, which must stay for the next wake.
-- KEYS[1] the goal's parked hash (job id -> "<queue> <park id>")
-- ARGV[1] the job id
-- ARGV[2] the entry as read before the wake
-- Returns 1 when the entry went, 0 when it had changed (or was gone).
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
