-- Stores an agent run's transcript (includes/saveTranscript.lua). With ARGV[8..16], the usage
-- of the run's last model call lands in the same script (usageAdd.lua's arguments).
-- KEYS[1] the transcript key, KEYS[2] the goal's threads (sorted set by save time),
-- KEYS[3] the goal hash, KEYS[4] the goal's token reservations
-- ARGV[1] transcript JSON, ARGV[2] TTL seconds, ARGV[3] now (ms), ARGV[4] thread id,
-- ARGV[5] transcripts kept per goal, ARGV[6] transcript key prefix (prefix .. threadId is a key),
-- ARGV[7] the threads index's TTL seconds (the goal's backstop)
-- ARGV[8..16] a call's usage, or nothing ('' in ARGV[9], the `<role>|<model>` key)
-- Returns how many old transcripts were dropped.
--- @include "../../goal/lua/includes/addUsage.lua"
--- @include "includes/saveTranscript.lua"
if ARGV[9] and ARGV[9] ~= '' then addUsage(KEYS[3], KEYS[4], ARGV, 8) end
return saveTranscript(KEYS[1], KEYS[2], ARGV, 1)
