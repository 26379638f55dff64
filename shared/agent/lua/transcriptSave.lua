-- Stores an agent run's transcript under its thread id and indexes it in its goal's threads
-- set; past `keep` transcripts per goal, the oldest go (their keys with them). With ARGV[7..14],
-- the usage of the run's last model call lands in the same script (usageAdd.lua's arguments).
-- KEYS[1] the transcript key, KEYS[2] the goal's threads (sorted set by save time),
-- KEYS[3] the goal hash, KEYS[4] the goal's token reservations
-- ARGV[1] transcript JSON, ARGV[2] TTL seconds, ARGV[3] now (ms), ARGV[4] thread id,
-- ARGV[5] transcripts kept per goal, ARGV[6] transcript key prefix (prefix .. threadId is a key)
-- ARGV[7..14] a call's usage, or nothing ('' in ARGV[8], the `<role>|<model>` key)
-- Returns how many old transcripts were dropped.
--- @include "../../goal/lua/includes/addUsage.lua"
if ARGV[8] and ARGV[8] ~= '' then addUsage(KEYS[3], KEYS[4], ARGV, 7) end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[2])
local keep = tonumber(ARGV[5])
if redis.call('ZCARD', KEYS[2]) <= keep then return 0 end
local old = redis.call('ZRANGE', KEYS[2], 0, -keep - 1)
for _, t in ipairs(old) do redis.call('UNLINK', ARGV[6] .. t) end
redis.call('ZREM', KEYS[2], unpack(old))
return #old
