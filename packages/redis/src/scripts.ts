import { LuaScript } from "./lua-script.js";

/**
 * Acquire on one node, in one call: `SET lock payload NX PX ttl`, and on success `INCR` of the
 * lock's token counter, whose new value is the fencing token stored inside the payload.
 *
 * Waiters stand in a line (a sorted set by arrival). A release names the first of them and
 * reserves the free lock for it a moment (the `next` key, with its own short expiry): while
 * that reservation lasts, nobody else gets the lock, so the named waiter is the only one who
 * needs to wake, and a holder that lets go cannot take it straight back.
 *
 * KEYS: lock, counter, waiters, next. ARGV: `<session id>:`, ttl ms, payload tail
 * (`\n<owner>[\n<value>]`), the lock's watch channel, then for a waiting try: the waiter's
 * member (its session id; empty for a try that does not wait), the score to rejoin the line
 * with (empty: now, by the server's clock; a named waiter keeps its place), and `1` if it may
 * be in the line (leave it on a grant). A waiting try that fails joins the line (the line
 * expires 3 TTLs after the last join, so a crashed waiter's entry goes).
 * A grant is announced on the watch channel as `g<ttl>`.
 * Returns the token (>= 1) when granted; otherwise `-1 - pttl` (<= 0) with the remaining
 * lease of the holder, or of the reservation (`pttl` -1: a key without expiry, not Baton's).
 */
export const ACQUIRE = new LuaScript(`
local member = ARGV[5] or ''
local reservedFor = redis.call('GET', KEYS[4])
local token = (tonumber(redis.call('GET', KEYS[2])) or 0) + 1
if (not reservedFor or reservedFor == member) and
    redis.call('SET', KEYS[1], ARGV[1] .. token .. ARGV[3], 'NX', 'PX', ARGV[2]) then
  redis.call('INCR', KEYS[2])
  if reservedFor then redis.call('DEL', KEYS[4]) end
  if ARGV[7] == '1' then redis.call('ZREM', KEYS[3], member) end
  redis.call('PUBLISH', ARGV[4], 'g' .. ARGV[2])
  return token
end
if member ~= '' then
  local score = ARGV[6]
  if score == '' then
    local t = redis.call('TIME')
    score = t[1] * 1000000 + t[2]
  end
  redis.call('ZADD', KEYS[3], 'NX', score, member)
  redis.call('PEXPIRE', KEYS[3], 3 * tonumber(ARGV[2]))
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl == -2 and reservedFor then pttl = redis.call('PTTL', KEYS[4]) end
return -1 - pttl
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
 * Owner-checked release of one or more locks, each handed to the first waiter in its line:
 * the waiter is taken out of the line, told on its own turn channel (`r<score>`, its place,
 * to rejoin there should its try fail), and the lock is reserved for it for a moment. A
 * waiter that does not hear (its process is gone) is skipped. The waiter behind it is told to
 * try when the reservation ends (`b<ms>`), in case the named one froze. Watchers are told on
 * the watch channel (`r`).
 * KEYS: lock keys, then the waiters keys, then the next keys. ARGV: reservation ms, `1` to
 * skip waiters who do not hear (a PUBLISH count is per node: not on a Cluster), then one owner
 * prefix per key, one watch channel per key, one turn channel prefix per key.
 * Returns how many keys were this session's grants and are released.
 */
export const RELEASE = new LuaScript(`
local n = #KEYS / 3
local released = 0
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  local prefix = ARGV[2 + i]
  if v and string.sub(v, 1, #prefix) == prefix then
    redis.call('DEL', KEYS[i])
    local turn = ARGV[2 + 2 * n + i]
    while true do
      local first = redis.call('ZPOPMIN', KEYS[n + i])
      if not first[1] then break end
      local heard = redis.call('PUBLISH', turn .. first[1], 'r' .. first[2])
      if heard > 0 or ARGV[2] ~= '1' then
        redis.call('SET', KEYS[2 * n + i], first[1], 'PX', ARGV[1])
        local second = redis.call('ZRANGE', KEYS[n + i], 0, 0)
        if second[1] then redis.call('PUBLISH', turn .. second[1], 'b' .. ARGV[1]) end
        break
      end
    end
    redis.call('PUBLISH', ARGV[2 + n + i], 'r')
    released = released + 1
  end
end
return released
`);

/**
 * A wait that ends without a grant leaves the line, and gives up a reservation made for it.
 * KEYS: waiters, next. ARGV: member.
 */
export const LEAVE_LINE = new LuaScript(`
redis.call('ZREM', KEYS[1], ARGV[1])
if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
return 1
`);

/**
 * Owner-checked release of one lock, announced on its channel (Redlock: no line of waiters).
 * KEYS: lock. ARGV: owner prefix, channel. Returns 1 when released, 0 when not this grant's.
 */
export const RELEASE_ONE = new LuaScript(`
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], '1')
  return 1
end
return 0
`);

/** Whether a {@link RELEASE} of one key or a {@link RELEASE_ONE} released the lock. */
export function releasedOne(reply: unknown): boolean {
  return Number(reply) === 1;
}

/**
 * The holder's payload and remaining lease, read together. KEYS: lock.
 * Returns `{payload or false, pttl}`.
 */
export const READ_HOLDER = new LuaScript(`
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
`);
