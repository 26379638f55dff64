-- A subtask's failure for good on its goal's timeline, appended once. The worker that saw the
-- job fail appends it while the goal still runs that cycle (ARGV[5] '1'). A job BullMQ fails
-- outside its processor (stalled too often) releases the cycle's reflection at once, which may
-- move the goal on before that worker's hook runs: the hook then appends nothing, and the
-- reflector, having moved the goal into reflecting, appends it (ARGV[5] '0') before its
-- decision's events. Either first looks back over the cycle's events (to its `dispatched`): a
-- failure already there is not appended again (a re-sent call, a reflection run again).
-- KEYS[1] goal hash, KEYS[2] events stream
-- ARGV[1] the event JSON, ARGV[2] events max length, ARGV[3] its step, ARGV[4] its index,
-- ARGV[5] '1': only while the goal runs that cycle (status running, or paused at a budget)
-- Returns 1 when appended, else 0.
local PAGE = 100
local h = redis.call('HMGET', KEYS[1], 'status', 'step', 'pausedFor')
if not h[1] then return 0 end
if ARGV[5] == '1' then
  local running = h[1] == 'running' or (h[1] == 'awaiting_human' and h[3] == 'budget')
  if not running or h[2] ~= ARGV[3] then return 0 end
end
local step, index = tonumber(ARGV[3]), tonumber(ARGV[4])

-- Whether the cycle's events hold this subtask's failure: newest first, a page at a time, until
-- the cycle's first `dispatched` (or the stream's start, which trimming may have cut).
local function recorded()
  local from = '+'
  while true do
    local page = redis.call('XREVRANGE', KEYS[2], from, '-', 'COUNT', PAGE)
    for _, entry in ipairs(page) do
      local json = entry[2][2]
      if string.find(json, '"subtask_failed"', 1, true) or string.find(json, '"dispatched"', 1, true) then
        -- An entry cjson cannot read (a lone surrogate's escape, stored before events were made
        -- well-formed) is skipped, not a reason to fail every reflection of the cycle.
        local ok, e = pcall(cjson.decode, json)
        if not ok then e = {} end
        if e.step == step and e.type == 'subtask_failed' and e.index == index then return true end
        if e.step == step and e.type == 'dispatched' and not e.redelivered then return false end
      end
    end
    if #page < PAGE then return false end
    from = '(' .. page[#page][1]
  end
end

if recorded() then return 0 end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', 'e', ARGV[1])
return 1
