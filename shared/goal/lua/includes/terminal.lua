-- The terminal goal statuses (status.ts's TERMINAL_STATUSES): a goal in one never moves again.
local terminal = { done = true, failed = true, cancelled = true, budget_exceeded = true }
