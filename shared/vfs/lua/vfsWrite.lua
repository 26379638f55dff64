-- Writes one artifact atomically and idempotently. With ARGV[9] '1' (a subtask's artifact), a
-- new version of a `done` artifact (a revision) keeps the old one in the history hash, the last
-- HISTORY_KEPT versions per name; with '2' (a tool's write to an artifact that is not its
-- subtask's) a `done` artifact is refused: finished work changes only through a planned revision.
-- KEYS[1] files (name -> meta JSON), KEYS[2] content (name -> inline content), KEYS[3] goal hash,
-- KEYS[4] history (`<name>@<version>` -> the old meta JSON, with its inline `content`),
-- KEYS[5] the goal's events stream, KEYS[6] a transcript's key, KEYS[7] the goal's threads,
-- KEYS[8] the goal's token reservations
-- ARGV[1] name, ARGV[2] meta JSON (no version; `op` unique per call), ARGV[3] inline content ('' when spilled)
-- ARGV[4] '1' if inline, ARGV[5] expected version ('' = any), ARGV[6] writer id
-- ARGV[7] max live files, ARGV[8] key TTL seconds, ARGV[9] '1' to keep a revised version's history,
-- '2' to refuse a new version of a `done` artifact, '0' neither
-- ARGV[10] a timeline event (JSON) that lands with the write ('' for none), ARGV[11] events max length
-- ARGV[12..18] the writing run's transcript, stored with the write (transcriptSave.lua's ARGV[1..7];
-- '' in ARGV[12] for none), ARGV[19..27] its last call's usage (its ARGV[8..16]), if any
-- Returns {version, blobRef no longer referenced or ''}, or an error reply naming the problem.
--- @include "../../goal/lua/includes/addUsage.lua"
--- @include "../../agent/lua/includes/saveTranscript.lua"
local HISTORY_KEPT = 3
-- Whether the goal's keys are kept without a TTL (it awaits a human: goalTransition.lua sets
-- ttlAt 0 then); read only where a write would set a TTL.
local persistedKeys = nil
local function persisted()
  if persistedKeys == nil then persistedKeys = redis.call('HGET', KEYS[3], 'ttlAt') == '0' end
  return persistedKeys
end
local name = ARGV[1]
local meta = cjson.decode(ARGV[2])
local curRaw = redis.call('HGET', KEYS[1], name)
local cur = nil
if curRaw then cur = cjson.decode(curRaw) end
-- The same call again (its reply was lost and ioredis sent it once more): it did everything
-- already, its event and transcript included.
if cur and meta.op and cur.op == meta.op then return { cur.version, '' } end
local version
local filesNew = false
if ARGV[9] == '2' and cur and cur.status == 'done' and cur.writer ~= ARGV[6] then
  return redis.error_reply('DONE_ARTIFACT ' .. name .. ' is done (finished at step ' .. tostring(cur.step) ..
    '); only a subtask planned to revise it may change it: write another artifact instead')
end
if cur and cur.status ~= 'evicted' then
  if cur.writer == ARGV[6] then
    -- The same writer again (a retried job): overwrite in place, same version.
    version = cur.version
  else
    if ARGV[5] ~= '' and tonumber(ARGV[5]) ~= cur.version then
      return redis.error_reply(
        'VERSION_CONFLICT ' .. name .. ' is at version ' .. cur.version .. ', expected ' .. ARGV[5])
    end
    version = cur.version + 1
  end
else
  if ARGV[5] ~= '' and tonumber(ARGV[5]) ~= 0 and not (cur and tonumber(ARGV[5]) == cur.version) then
    return redis.error_reply('VERSION_CONFLICT ' .. name .. ' does not exist, expected version ' .. ARGV[5])
  end
  local maxFiles = tonumber(ARGV[7])
  local count = redis.call('HLEN', KEYS[1])
  filesNew = count == 0
  if count >= maxFiles then
    local live = 0
    for _, v in ipairs(redis.call('HVALS', KEYS[1])) do
      if cjson.decode(v).status ~= 'evicted' then live = live + 1 end
    end
    if live >= maxFiles then
      return redis.error_reply('TOO_MANY_FILES the goal already has ' .. live .. ' files (max ' .. maxFiles .. ')')
    end
  end
  version = 1
  if cur then version = cur.version + 1 end
end
meta.version = version
meta.writer = ARGV[6]
local ttl = tonumber(ARGV[8])
local oldBlob = ''
if ARGV[9] == '1' and cur and cur.status == 'done' and cur.writer ~= ARGV[6] then
  -- A revision of finished work: the old version stays (its blob too), the oldest kept one goes.
  local inline = redis.call('HGET', KEYS[2], name)
  if inline then cur.content = inline end
  redis.call('HSET', KEYS[4], name .. '@' .. cur.version, cjson.encode(cur))
  local droppedKey = name .. '@' .. (cur.version - HISTORY_KEPT)
  local dropped = redis.call('HGET', KEYS[4], droppedKey)
  if dropped then
    redis.call('HDEL', KEYS[4], droppedKey)
    local d = cjson.decode(dropped)
    if d.blobRef and d.blobRef ~= meta.blobRef then oldBlob = d.blobRef end
  end
  if not persisted() then redis.call('EXPIRE', KEYS[4], ttl) end
elseif cur and cur.blobRef and cur.blobRef ~= meta.blobRef then
  oldBlob = cur.blobRef
end
redis.call('HSET', KEYS[1], name, cjson.encode(meta))
local newContent = false
if ARGV[4] == '1' then
  newContent = redis.call('HSET', KEYS[2], name, ARGV[3]) == 1
else
  redis.call('HDEL', KEYS[2], name)
end
-- The event lands with the write (a subtask's `subtask_finished`): one script, not two calls.
local event = ARGV[10] and ARGV[10] ~= ''
if event then redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[11], '*', 'e', ARGV[10]) end
-- The backstop TTL of a key this write made: goalTransition.lua renews the goal's keys (these
-- two, the goal hash and its events) once half of it has run, so a write never reads a TTL.
-- A content hash can be new beside an older files hash (its first files were spilled); a new
-- files hash may be a goal's whose keys are gone, so an events stream this write made gets one.
-- A goal awaiting a human has keys without a TTL (its move took them off): a write made then (a
-- subtask finishing after a budget pause) gives none back, or they would expire under the wait.
if filesNew and not persisted() then
  redis.call('EXPIRE', KEYS[1], ttl)
  redis.call('EXPIRE', KEYS[2], ttl)
  if event then redis.call('EXPIRE', KEYS[5], ttl, 'NX') end
elseif newContent and not filesNew and not persisted() then
  redis.call('EXPIRE', KEYS[2], ttl, 'NX')
end
-- The run that wrote it: its transcript and last call's usage, in the same script.
if ARGV[12] and ARGV[12] ~= '' then
  if ARGV[20] and ARGV[20] ~= '' then addUsage(KEYS[3], KEYS[8], ARGV, 19) end
  saveTranscript(KEYS[6], KEYS[7], ARGV, 12)
end
return { version, oldBlob }
