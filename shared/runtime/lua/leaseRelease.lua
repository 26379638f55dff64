-- Releases a lease (shared/runtime/lease.ts) if it is still the caller's: one that lapsed and
-- was taken by another run since stays that run's.
-- KEYS[1] the lease key
-- ARGV[1] the caller's token
-- Returns 1 when released, 0 when the lease was not (or no longer) the caller's.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
