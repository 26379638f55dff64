-- saveTranscript(transcriptKey, threadsKey, a, at): stores a run's transcript under its thread
-- id and indexes it in its goal's threads set (sorted by save time); past `keep` transcripts per
-- goal, the oldest go (their keys with them). Arguments from a[at .. at + 6]: transcript JSON,
-- TTL seconds, now (ms), thread id, transcripts kept per goal, transcript key prefix (prefix ..
-- threadId is a key), the index's TTL seconds. Returns how many old transcripts were dropped.
-- The index gets its TTL when it is made, not on every save: the goal's moves renew it with the
-- goal's other keys. So it can outlive a transcript: readers list the entries saved within the
-- transcripts' TTL.
local function saveTranscript(transcriptKey, threadsKey, a, at)
  redis.call('SET', transcriptKey, a[at], 'EX', a[at + 1])
  redis.call('ZADD', threadsKey, a[at + 2], a[at + 3])
  local count = redis.call('ZCARD', threadsKey)
  if count == 1 then redis.call('EXPIRE', threadsKey, a[at + 6]) end
  local keep = tonumber(a[at + 4])
  if count <= keep then return 0 end
  local old = redis.call('ZRANGE', threadsKey, 0, -keep - 1)
  for _, t in ipairs(old) do redis.call('UNLINK', a[at + 5] .. t) end
  redis.call('ZREM', threadsKey, unpack(old))
  return #old
end
