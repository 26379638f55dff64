-- saveTranscript(transcriptKey, threadsKey, a, at): stores a run's transcript under its thread
-- id and indexes it in its goal's threads set (sorted by save time); past `keep` transcripts per
-- goal, the oldest go (their keys with them). Arguments from a[at .. at + 5]: transcript JSON,
-- TTL seconds, now (ms), thread id, transcripts kept per goal, transcript key prefix (prefix ..
-- threadId is a key). Returns how many old transcripts were dropped.
local function saveTranscript(transcriptKey, threadsKey, a, at)
  redis.call('SET', transcriptKey, a[at], 'EX', a[at + 1])
  redis.call('ZADD', threadsKey, a[at + 2], a[at + 3])
  redis.call('EXPIRE', threadsKey, a[at + 1])
  local keep = tonumber(a[at + 4])
  if redis.call('ZCARD', threadsKey) <= keep then return 0 end
  local old = redis.call('ZRANGE', threadsKey, 0, -keep - 1)
  for _, t in ipairs(old) do redis.call('UNLINK', a[at + 5] .. t) end
  redis.call('ZREM', threadsKey, unpack(old))
  return #old
end
