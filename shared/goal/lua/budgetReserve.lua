-- Reserves a model call's tokens against its goal's budgets before the call is made, so
-- concurrent calls (one per running subagent) cannot all spend what remains at once.
-- KEYS[1] goal hash, KEYS[2] reservations (sorted set: `<id>:<tokens>` by expiry, ms)
-- ARGV[1] reservation id, ARGV[2] max output tokens wanted, ARGV[3] estimated input tokens
-- (characters / 4; scaled by the goal's `inputRatio`, learned from its earlier calls),
-- ARGV[4] fewest output tokens worth a call, ARGV[5] now (ms), ARGV[6] expiry (ms),
-- ARGV[7] key TTL seconds
-- Returns {'ok', max output tokens granted, member} ({'ok', wanted, ''} without a token budget),
-- {'paused'} (the goal waits for a human to raise a budget), {'ended', status}, {'gone'},
-- {'seconds', elapsed ms, max seconds}, or {'tokens', used, reserved, max, the call's input as
-- held, fewest output}, or {'busy', the same}: the call would fit once calls in flight end (their
-- unspent reservations come back), so it waits and asks again instead of ending the goal. A re-send of a
-- reservation that landed (a lost reply) gets what it was granted, reserving nothing more.
local h = redis.call('HMGET', KEYS[1], 'status', 'pausedFor', 'budgets', 'createdAt',
  'tokens.input', 'tokens.output', 'tokens.cache_read', 'tokens.cache_write', 'inputRatio', 'tokens')
local status = h[1]
if not status then return { 'gone' } end
--- @include "includes/terminal.lua"
if terminal[status] then return { 'ended', status } end
if status == 'awaiting_human' and h[2] == 'budget' then return { 'paused' } end
local b = cjson.decode(h[3] or '{}')
local now = tonumber(ARGV[5])
local elapsed = now - tonumber(h[4] or now)
if b.maxSeconds and elapsed > b.maxSeconds * 1000 then return { 'seconds', elapsed, tostring(b.maxSeconds) } end
local wanted = tonumber(ARGV[2])
if not b.maxTokens then return { 'ok', wanted, '' } end
-- A reservation whose call died with its process lapses at its expiry.
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local reserved = 0
local mine = ARGV[1] .. ':'
local again = nil
for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  reserved = reserved + tonumber(string.match(m, ':(%d+)$'))
  if string.sub(m, 1, #mine) == mine then again = m end
end
local used = 0
-- `tokens` is the grand total (usageAdd.lua); goals counted before it kept one total per kind.
for _, i in ipairs({ 5, 6, 7, 8, 10 }) do used = used + tonumber(h[i] or '0') end
local input = math.ceil(tonumber(ARGV[3]) * tonumber(h[9] or '1'))
-- A re-send of this very reservation (a lost reply): what it reserved then, not a second share.
if again then
  local held = tonumber(string.match(again, ':(%d+)$'))
  return { 'ok', math.max(0, math.min(wanted, held - input)), again }
end
local grant = math.min(wanted, b.maxTokens - used - reserved - input)
local floor = tonumber(ARGV[4])
if grant < floor then
  local why = (reserved > 0 and used + input + floor <= b.maxTokens) and 'busy' or 'tokens'
  return { why, used, reserved, b.maxTokens, input, floor }
end
-- The call's input is held too: calls in flight hold all they will spend.
local member = ARGV[1] .. ':' .. (input + grant)
redis.call('ZADD', KEYS[2], ARGV[6], member)
redis.call('EXPIRE', KEYS[2], ARGV[7])
return { 'ok', grant, member }
