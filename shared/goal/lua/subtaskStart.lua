-- A subtask job's first start: reads what it needs of its goal and appends its
-- `subtask_started` event, in one script (they were two round trips). The event lands only for
-- a goal that goes on: not ended, not waiting at a budget (the job parks or returns then).
-- KEYS[1] goal hash, KEYS[2] events stream
-- ARGV[1] the event JSON, ARGV[2] events max length
-- Returns the goal's status, goal text, budgets JSON, createdAt and pausedFor (HMGET order);
-- a missing goal's status is nil and nothing is appended.
local RESENT_LOOKBACK = 32
local h = redis.call('HMGET', KEYS[1], 'status', 'goal', 'budgets', 'createdAt', 'pausedFor')
local status = h[1]
if not status then return h end
--- @include "includes/terminal.lua"
if terminal[status] or (status == 'awaiting_human' and h[5] == 'budget') then return h end
-- The same call again (its reply was lost and ioredis sent it once more) finds its event among
-- the last few (the JSON holds the run's unique thread id): it is not appended twice.
for _, entry in ipairs(redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', RESENT_LOOKBACK)) do
  if entry[2][2] == ARGV[1] then return h end
end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', 'e', ARGV[1])
return h
