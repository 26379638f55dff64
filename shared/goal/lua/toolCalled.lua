-- Appends a tool call's `tool_called` event with the usage of the model call that asked for it,
-- when that usage is not booked yet: one script where an XADD and usageAdd.lua were two
-- requests, once per tool turn.
-- KEYS[1] goal hash, KEYS[2] the goal's token reservations, KEYS[3] the goal's events stream
-- ARGV[1] the event (JSON), ARGV[2] events max length
-- ARGV[3..11] the call's usage (usageAdd.lua's ARGV[1..9])
-- Returns 1, or 0 when the goal is gone (nothing is written then: no orphan keys). A re-send of
-- a call that landed (a lost reply: its usage is booked already) appends nothing either.
--- @include "includes/addUsage.lua"
local booked = addUsage(KEYS[1], KEYS[2], ARGV, 3)
if booked == 0 then return 0 end
if booked == 2 then return 1 end
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[2], '*', 'e', ARGV[1])
return 1
