-- Renews or releases a lease (shared/runtime/lease.ts) if it is still the caller's: one that
-- lapsed and was taken by another run since stays that run's.
-- KEYS[1] the lease key
-- ARGV[1] the caller's token, ARGV[2] milliseconds to renew it for, or 0 to release it
-- Returns 1 when renewed or released, 0 when the lease was not (or no longer) the caller's.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if tonumber(ARGV[2]) > 0 then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return redis.call('DEL', KEYS[1])
