-- Adds one model call's token usage to its goal and ends the call's token reservation, at once:
-- a concurrent reservation never sees the reservation gone without its usage counted.
-- KEYS[1] goal hash, KEYS[2] reservations (sorted set)
-- ARGV[1] reservation member ('' when none), ARGV[2] `<role>|<model>`
-- ARGV[3..6] input, output, cache_read, cache_write tokens
-- ARGV[7] the configured model id the response's model was requested as ('' when the same)
-- ARGV[8] '1' when the usage is an estimate (the endpoint reported none)
-- Returns 1, or 0 when the goal is gone (nothing is written then: no orphan hash).
--- @include "includes/addUsage.lua"
return addUsage(KEYS[1], KEYS[2], ARGV, 1)
