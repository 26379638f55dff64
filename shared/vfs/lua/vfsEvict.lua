-- Per-cycle eviction (P51): drop entries that are done and older than N steps, and any
-- entry older than M steps. An evicted name leaves a tombstone in the index; the tombstone
-- itself is dropped T cycles after its eviction (T >= 1: the evicting cycle's reflector and
-- the next planner see it once). The files a goal started with (`input`) are never aged out.
-- A name's kept versions (the history) go with its content: an evicted artifact's history
-- held its blobs for the goal's life, and a name used again after its tombstone went started
-- at version 1 beside them (a failed revision then put a long-evicted version back).
-- KEYS[1] files, KEYS[2] content, KEYS[3] events stream, KEYS[4] history
-- ARGV[1] current step, ARGV[2] done-after steps, ARGV[3] any-after steps, ARGV[4] now,
-- ARGV[5] events max length, ARGV[6] tombstone steps, ARGV[7] key TTL seconds
-- Returns {a flat list: name, reason, blobRef ('' if inline), ...; the blobs of dropped history}
local step = tonumber(ARGV[1])
-- The history's keys by name, read once (a scan per evicted name made a cycle's eviction
-- quadratic in the goal's files, with Redis blocked for every goal meanwhile).
local historyByName = nil
local historyBlobs = {}
local function historyOf(name)
  if not historyByName then
    historyByName = {}
    for _, key in ipairs(redis.call('HKEYS', KEYS[4])) do
      local n = string.match(key, '^(.*)@%d+$')
      if n then
        historyByName[n] = historyByName[n] or {}
        table.insert(historyByName[n], key)
      end
    end
  end
  return historyByName[name] or {}
end
-- Drops every kept version of `name`, noting its blob.
local function dropHistory(name)
  for _, key in ipairs(historyOf(name)) do
    local raw = redis.call('HGET', KEYS[4], key)
    if raw then
      local d = cjson.decode(raw)
      if d.blobRef then table.insert(historyBlobs, d.blobRef) end
      redis.call('HDEL', KEYS[4], key)
    end
  end
end
local doneAfter = tonumber(ARGV[2])
local anyAfter = tonumber(ARGV[3])
local tombSteps = tonumber(ARGV[6])
local out = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local name = all[i]
  local e = cjson.decode(all[i + 1])
  if e.status == 'evicted' then
    if step - (e.evictedStep or e.step) >= tombSteps then
      redis.call('HDEL', KEYS[1], name)
      dropHistory(name)
    end
  elseif not e.input then
    -- A file the goal started with stays: the user gave it for the whole goal.
    local age = step - e.step
    local reason = nil
    if e.status == 'done' and age > doneAfter then reason = 'done_aged' end
    if age > anyAfter then reason = 'max_age' end
    if reason then
      local tomb = { status = 'evicted', step = e.step, evictedStep = step, reason = reason, bytes = 0,
                     version = e.version, role = e.role, updatedAt = tonumber(ARGV[4]) }
      redis.call('HSET', KEYS[1], name, cjson.encode(tomb))
      redis.call('HDEL', KEYS[2], name)
      dropHistory(name)
      table.insert(out, name)
      table.insert(out, reason)
      table.insert(out, e.blobRef or '')
      redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 'e',
        cjson.encode({ type = 'evicted', step = step, name = name, reason = reason, at = tonumber(ARGV[4]) }))
    end
  end
end
-- The backstop TTL follows activity, renewed once it has run below half (as goal moves do).
-- None (-1): the goal awaits a human and its keys are kept (a budget pause can land between
-- the reflection's move and this eviction): giving them a TTL would expire them under the wait.
local ttl = tonumber(ARGV[7])
local left = redis.call('TTL', KEYS[1])
if left >= 0 and left < ttl / 2 then
  for k = 1, 4 do redis.call('EXPIRE', KEYS[k], ttl) end
end
return { out, historyBlobs }
