-- A job's checkpoint in parts (shared/goal/checkpoints.ts): its head `<jobId>#h` (the checkpoint
-- without its messages), its messages `<jobId>#<i>`, and `<jobId>#n`: how many messages it has
-- and which write stored it (`<count> <run>.<n>`). A checkpoint at `<jobId>` was written whole by
-- an earlier version, which reads only that field: a process of that version finds none of
-- these (its job starts over) rather than a head without its messages.
local function checkpointParts(hash, jobId)
  local meta = redis.call('HGET', hash, jobId .. '#n')
  if not meta then return 0, nil end
  local n, write = string.match(meta, '^(%d+) (%S+)$')
  return tonumber(n), write
end

-- Stores a checkpoint: its head and its messages from index `base` on (the ones before are its
-- writer's last write's). A write that goes on from an earlier one (base > 0) is refused unless
-- that write is the one stored now (a write lost or refused in between, or another run's write,
-- breaks the chain): it returns false, and its writer's next write is whole. Message fields
-- past the new count are deleted. (A run has at most a few hundred messages, maxTurns being at
-- most 200: well within unpack's limit.)
-- argv[from] the write it goes on from, argv[from + 1] this write, argv[from + 2] base,
-- argv[from + 3] the head, argv[from + 4 ..] the messages from base on
local function storeCheckpoint(hash, jobId, argv, from)
  local after, base = argv[from], tonumber(argv[from + 2])
  local storedN, storedWrite = checkpointParts(hash, jobId)
  if base > 0 and (storedWrite ~= after or storedN < base) then return false end
  local count = base + #argv - from - 3
  local fields = { jobId .. '#h', argv[from + 3], jobId .. '#n', count .. ' ' .. argv[from + 1] }
  for i = from + 4, #argv do
    fields[#fields + 1] = jobId .. '#' .. (base + i - from - 4)
    fields[#fields + 1] = argv[i]
  end
  redis.call('HSET', hash, unpack(fields))
  for i = count, storedN - 1 do redis.call('HDEL', hash, jobId .. '#' .. i) end
  -- A whole write replaces one an earlier version stored whole.
  if base == 0 then redis.call('HDEL', hash, jobId) end
  return true
end

-- Stores a running job's checkpoint while its lock is the run's (`lockKey` holds `token`), the
-- checkpoints hash getting `ttl` when it has none. Returns 1, or 3 when not stored (the lock is
-- another run's, or storeCheckpoint refused a partial write).
local function storeUnderLock(hash, jobId, lockKey, token, ttl, argv, from)
  if redis.call('GET', lockKey) ~= token or not storeCheckpoint(hash, jobId, argv, from) then return 3 end
  redis.call('EXPIRE', hash, ttl, 'NX')
  return 1
end

-- Deletes a job's checkpoint: its head, its `#n` field and its messages (or the one field of a
-- checkpoint an earlier version stored whole). Returns how many fields were deleted.
local function clearCheckpoint(hash, jobId)
  local n = checkpointParts(hash, jobId)
  local fields = { jobId, jobId .. '#h', jobId .. '#n' }
  for i = 0, n - 1 do fields[#fields + 1] = jobId .. '#' .. i end
  return redis.call('HDEL', hash, unpack(fields))
end
