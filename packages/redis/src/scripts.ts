import { LuaScript } from "./lua-script.js";

/**
 * Acquire on one node, in one call: `SET lock payload NX PX ttl`, and on success `INCR` of the
 * lock's token counter, whose new value is the fencing token stored inside the payload.
 * KEYS: lock, counter. ARGV: `<session id>:`, ttl ms, payload tail (`\n<owner>[\n<value>]`),
 * the lock's channel (a grant is announced there too, for watchers).
 * Returns the token (>= 1) when granted; when held, `-1 - pttl` (<= 0) with the holder's
 * remaining lease (`pttl` -1: a key without expiry, not Baton's).
 */
export const ACQUIRE = new LuaScript(`
local token = (tonumber(redis.call('GET', KEYS[2])) or 0) + 1
if redis.call('SET', KEYS[1], ARGV[1] .. token .. ARGV[3], 'NX', 'PX', ARGV[2]) then
  redis.call('INCR', KEYS[2])
  redis.call('PUBLISH', ARGV[4], 'g')
  return token
end
return -1 - redis.call('PTTL', KEYS[1])
`);

/** Decodes an {@link ACQUIRE} reply: the token, or the holder's remaining lease. */
export function acquireReply(reply: unknown): { token: bigint } | { pttl: number } {
  const n = Number(reply);
  return n >= 1 ? { token: BigInt(n) } : { pttl: -1 - n };
}

/**
 * Redlock acquire on one node: `SET lock payload NX PX ttl`, no counter (Redlock has no
 * fencing token). KEYS: lock. ARGV: payload, ttl ms.
 * Returns 1 when granted, `-1 - pttl` (<= 0) when held.
 */
export const ACQUIRE_NO_TOKEN = new LuaScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
return -1 - redis.call('PTTL', KEYS[1])
`);

/**
 * Renews every lock of a session in one call: an owner-checked PEXPIRE per key.
 * KEYS: lock keys. ARGV: ttl ms, then one owner prefix per key.
 * Returns one 1 (renewed) or 0 (no longer this grant's) per key, in order.
 */
export const RENEW = new LuaScript(`
local out = {}
for i, key in ipairs(KEYS) do
  local prefix = ARGV[i + 1]
  local v = redis.call('GET', key)
  if v and string.sub(v, 1, #prefix) == prefix then
    redis.call('PEXPIRE', key, ARGV[1])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
`);

/**
 * Owner-checked release of one or more locks, each deletion announced on its channel.
 * KEYS: lock keys. ARGV: one owner prefix per key, then one channel per key.
 * Returns `{released, heard}`: how many keys were deleted, and how many subscribers (on this
 * node) heard the announcements, i.e. whether anyone was waiting.
 */
export const RELEASE = new LuaScript(`
local n = #KEYS
local released = 0
local heard = 0
for i, key in ipairs(KEYS) do
  local prefix = ARGV[i]
  local v = redis.call('GET', key)
  if v and string.sub(v, 1, #prefix) == prefix then
    redis.call('DEL', key)
    heard = heard + redis.call('PUBLISH', ARGV[n + i], '1')
    released = released + 1
  end
end
return {released, heard}
`);

/**
 * Owner-checked release of one lock, announced on its channel: the hot path of
 * {@link RELEASE}, cheaper for one key. KEYS: lock. ARGV: owner prefix, channel.
 * Returns 0 when the lock was not this grant's, else `1 + 2 * heard` (subscribers told).
 */
export const RELEASE_ONE = new LuaScript(`
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1 + 2 * redis.call('PUBLISH', ARGV[2], '1')
end
return 0
`);

/** Decodes a {@link RELEASE_ONE} reply. */
export function releaseOneReply(reply: unknown): { released: boolean; heard: number } {
  const n = Number(reply);
  return n >= 1 ? { released: true, heard: (n - 1) / 2 } : { released: false, heard: 0 };
}

/**
 * The holder's payload and remaining lease, read together. KEYS: lock.
 * Returns `{payload or false, pttl}`.
 */
export const READ_HOLDER = new LuaScript(`
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
`);
