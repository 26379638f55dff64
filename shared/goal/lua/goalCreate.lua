-- Stores a new goal: its hash (status queued), its `created` event and its index entry, at
-- once. Safe to run twice (a re-sent call after a lost reply): an existing goal is left as is.
-- KEYS[1] goal hash, KEYS[2] events stream, KEYS[3] goals index, KEYS[4] live goals (sorted sets by creation)
-- ARGV[1] goal id, ARGV[2] now (ms), ARGV[3] goal text, ARGV[4] '1' under review else '0'
-- ARGV[5] budgets JSON, ARGV[6] created event JSON, ARGV[7] events max length, ARGV[8] key TTL
-- ARGV[9] the request: `<fingerprint>:<the call's operation id>` (the fingerprint empty without an
-- idempotency key): the call sent again after a lost reply finds its own
-- ARGV[10] the first goal id of its idempotency key (`keyOf`), or '' without a key
-- Returns {1} when created; {0, the stored request or '', its status} when the goal existed.
local existing = redis.call('HMGET', KEYS[1], 'status', 'request')
if existing[1] then return { 0, existing[2] or '', existing[1] } end
local ttl = tonumber(ARGV[8])
-- `ttlAt`: when the keys expire (ms). The services judge a renewal by it, not by their own TTL:
-- a producer configured with a shorter one made keys that expired before any move renewed them.
redis.call('HSET', KEYS[1], 'goal', ARGV[3], 'status', 'queued', 'step', '0', 'depth', '0', 'planStep', '0',
  'createdAt', ARGV[2], 'updatedAt', ARGV[2], 'review', ARGV[4], 'budgets', ARGV[5],
  'ttlAt', tostring(tonumber(ARGV[2]) + ttl * 1000), 'request', ARGV[9])
if ARGV[10] ~= '' then redis.call('HSET', KEYS[1], 'keyOf', ARGV[10]) end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[7], '*', 'e', ARGV[6])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[2], ARGV[1])
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('EXPIRE', KEYS[2], ttl)
return { 1 }
