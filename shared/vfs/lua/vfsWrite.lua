-- Writes one artifact atomically and idempotently. With ARGV[9] '1' (a subtask's artifact), a
-- new version of a `done` artifact (a revision) keeps the old one in the history hash, the last
-- HISTORY_KEPT versions per name; with '2' (a tool's write to an artifact that is not its
-- subtask's) a `done` artifact is refused: finished work changes only through a planned revision;
-- with '3' (a subtask's last write of a run that did not finish) as '1', but a done version it was
-- to revise stays current.
-- KEYS[1] files (name -> meta JSON), KEYS[2] content (name -> inline content), KEYS[3] goal hash,
-- KEYS[4] history (`<name>@<version>` -> the old meta JSON, with its inline `content`),
-- KEYS[5] the goal's events stream, KEYS[6] a transcript's key, KEYS[7] the goal's threads,
-- KEYS[8] the goal's token reservations, KEYS[9] the writing job's lock (BullMQ's `<job key>:lock`;
-- any key when ARGV[28] is ''), KEYS[10] the goal's checkpoints hash
-- ARGV[1] name, ARGV[2] meta JSON (no version; `op` unique per call), ARGV[3] inline content ('' when spilled)
-- ARGV[4] '1' if inline, ARGV[5] expected version ('' = any), or `<version>:<op>`: the entry as
-- the writer read it (its last write's op), changed since by any write, its own writer's too, is
-- a conflict; ARGV[6] writer id
-- ARGV[7] max live files, ARGV[8] key TTL seconds, ARGV[9] '1' to keep a revised version's history,
-- '2' to refuse a new version of a `done` artifact, '3' to keep a done version current, '0' none
-- ARGV[10] a timeline event (JSON) that lands with the write ('' for none), ARGV[11] events max length
-- ARGV[12..18] the writing run's transcript, stored with the write (transcriptSave.lua's ARGV[1..7];
-- '' in ARGV[12] for none), ARGV[19..27] its last call's usage (its ARGV[8..16]), if any ('' each
-- otherwise: always sixteen), ARGV[28] the writing job's lock token ('' for a write outside a job),
-- ARGV[29] the job whose checkpoint goes with the write (its run's last: the run is over), or ''
-- Returns {version, blobRefs no longer referenced (space-separated) or ''}, with a third element when a revision that
-- did not finish left the done version current ('dropped': its output was not stored; 'kept': it
-- is in the history); or an error reply naming the problem.
--- @include "../../goal/lua/includes/addUsage.lua"
--- @include "../../agent/lua/includes/saveTranscript.lua"
--- @include "../../goal/lua/includes/checkpointWrite.lua"
local HISTORY_KEPT = 3
-- Whether the goal's keys are kept without a TTL (it awaits a human: goalTransition.lua sets
-- ttlAt 0 then); read only where a write would set a TTL.
local persistedKeys = nil
local function persisted()
  if persistedKeys == nil then persistedKeys = redis.call('HGET', KEYS[3], 'ttlAt') == '0' end
  return persistedKeys
end
-- Keeps the newest HISTORY_KEPT versions of a name: its versions need not be consecutive (a
-- delete, a rewrite by another job between revisions), so the oldest is found, not computed.
-- Returns the dropped versions' blobs (space-separated), but `keepBlob`.
local function trimHistory(name, keepBlob)
  local versions = {}
  for _, key in ipairs(redis.call('HKEYS', KEYS[4])) do
    local n, v = string.match(key, '^(.*)@(%d+)$')
    if n == name then table.insert(versions, tonumber(v)) end
  end
  table.sort(versions, function(a, b) return a > b end)
  local blobs = {}
  for i = HISTORY_KEPT + 1, #versions do
    local key = name .. '@' .. versions[i]
    local d = cjson.decode(redis.call('HGET', KEYS[4], key))
    redis.call('HDEL', KEYS[4], key)
    if d.blobRef and d.blobRef ~= keepBlob then table.insert(blobs, d.blobRef) end
  end
  return table.concat(blobs, ' ')
end
local name = ARGV[1]
local meta = cjson.decode(ARGV[2])
local curRaw = redis.call('HGET', KEYS[1], name)
local cur = nil
if curRaw then cur = cjson.decode(curRaw) end
-- The same call again (its reply was lost and ioredis sent it once more): it did everything
-- already, its event and transcript included.
if cur and meta.op and cur.op == meta.op then return { cur.version, '' } end
-- A job another worker took since this run's lock expired: that delivery runs it now, and this
-- run (which has not learnt of it yet) must not write beside it, nor over what comes after it.
if ARGV[28] ~= '' and redis.call('GET', KEYS[9]) ~= ARGV[28] then
  return redis.error_reply('LOCK_LOST ' .. name .. ' was not written: the job\'s lock is gone or another ' ..
    'worker\'s (it expired before it was renewed), and that delivery runs the job now')
end
-- A read-modify-write (an edit, a delete) names the write it read: a retried writer rewrites in
-- place at the same version, so the version alone missed its rewrite, which the edit then lost.
local expected, expectedOp = string.match(ARGV[5], '^(%d*):?(.*)$')
if expectedOp and expectedOp ~= '' and (not cur or cur.op ~= expectedOp) then
  return redis.error_reply('VERSION_CONFLICT ' .. name .. ' was written again since it was read (version ' ..
    tostring(cur and cur.version or 0) .. ')')
end
local version
local filesNew = false
if ARGV[9] == '2' and cur and cur.status == 'done' and cur.writer ~= ARGV[6] then
  return redis.error_reply('DONE_ARTIFACT ' .. name .. ' is done (finished at step ' .. tostring(cur.step) ..
    '); only a subtask planned to revise it may change it: write another artifact instead')
end
-- The event lands with the write (a subtask's `subtask_finished`): one script, not two calls.
local function appendEvent()
  if not ARGV[10] or ARGV[10] == '' then return false end
  redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[11], '*', 'e', ARGV[10])
  return true
end
-- The run that wrote it: its transcript and last call's usage, in the same script; its job's
-- checkpoint goes (a separate call after the write cost a round trip per subtask).
local function saveRun()
  if ARGV[29] and ARGV[29] ~= '' then clearCheckpoint(KEYS[10], ARGV[29]) end
  if not ARGV[12] or ARGV[12] == '' then return end
  if ARGV[20] and ARGV[20] ~= '' then addUsage(KEYS[3], KEYS[8], ARGV, 19) end
  saveTranscript(KEYS[6], KEYS[7], ARGV, 12)
end
-- The done version a planned revision (this writer) was to change: current, or in the history
-- right below the current version when the run's own tool writes replaced it.
local function revisedDone()
  if not cur then return nil end
  if cur.writer ~= ARGV[6] then
    if cur.status == 'done' then return cur end
    return nil
  end
  local raw = redis.call('HGET', KEYS[4], name .. '@' .. (cur.version - 1))
  if not raw then return nil end
  local prev = cjson.decode(raw)
  if prev.status == 'done' and prev.writer ~= ARGV[6] then return prev end
  return nil
end
-- A revision's run that did not finish (it failed, or stopped at its token cap: ARGV[9] '3')
-- leaves the done version current, or puts it back: its own output goes to the history (and
-- its transcript), not over finished work. The op is noted on the current entry, so a re-sent
-- call changes nothing; the caller drops a blob it put when the output was not kept.
local function keepDone(done)
  local released = ''
  if done ~= cur then
    -- cur is this run's working copy: the output replaces it in the history; the done one returns.
    if cur.blobRef and cur.blobRef ~= meta.blobRef then released = cur.blobRef end
    local failed = meta
    failed.version = cur.version
    failed.writer = ARGV[6]
    if ARGV[4] == '1' then failed.content = ARGV[3] end
    redis.call('HSET', KEYS[4], name .. '@' .. cur.version, cjson.encode(failed))
    redis.call('HDEL', KEYS[4], name .. '@' .. done.version)
    if not persisted() then redis.call('EXPIRE', KEYS[4], tonumber(ARGV[8])) end
  end
  if done ~= cur then
    -- A history entry holds its inline content; the current one's is in the content hash.
    if done.content then redis.call('HSET', KEYS[2], name, done.content) else redis.call('HDEL', KEYS[2], name) end
    done.content = nil
    done.version = cur.version + 1
  end
  done.op = meta.op
  redis.call('HSET', KEYS[1], name, cjson.encode(done))
  appendEvent()
  saveRun()
  return { done.version, released, done == cur and 'dropped' or 'kept' }
end
if ARGV[9] == '3' and meta.status ~= 'done' then
  local done = revisedDone()
  if done then return keepDone(done) end
end
if cur and cur.status ~= 'evicted' then
  if cur.writer == ARGV[6] then
    -- The same writer again (a retried job): overwrite in place, same version.
    version = cur.version
  else
    if expected ~= '' and tonumber(expected) ~= cur.version then
      return redis.error_reply(
        'VERSION_CONFLICT ' .. name .. ' is at version ' .. cur.version .. ', expected ' .. expected)
    end
    version = cur.version + 1
  end
else
  if expected ~= '' and tonumber(expected) ~= 0 and not (cur and tonumber(expected) == cur.version) then
    return redis.error_reply('VERSION_CONFLICT ' .. name .. ' does not exist, expected version ' .. expected)
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
    -- Deleted names stay in the index (and every planner prompt) until an eviction drops them:
    -- no more of them than live files, or writing and deleting new names would grow it unbounded.
    if not cur and count >= 2 * maxFiles then
      return redis.error_reply('TOO_MANY_FILES the goal has ' .. (count - live) .. ' deleted names not yet ' ..
        'dropped (they go at the next cycle): write one of them again, or another of its ' .. live .. ' files')
    end
  end
  version = 1
  if cur then version = cur.version + 1 end
end
meta.version = version
meta.writer = ARGV[6]
local ttl = tonumber(ARGV[8])
local oldBlob = ''
if (ARGV[9] == '1' or ARGV[9] == '3') and cur and cur.status == 'done' and cur.writer ~= ARGV[6] then
  -- A revision of finished work: the old version stays (its blob too), the oldest kept one goes.
  local inline = redis.call('HGET', KEYS[2], name)
  if inline then cur.content = inline end
  redis.call('HSET', KEYS[4], name .. '@' .. cur.version, cjson.encode(cur))
  oldBlob = trimHistory(name, meta.blobRef)
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
local event = appendEvent()
-- The backstop TTL of a key this write made: goalTransition.lua renews the goal's keys (these
-- two, the goal hash and its events) once less than half of it is left, so a write never reads a TTL.
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
saveRun()
return { version, oldBlob }
