import { LuaScript } from "./lua-script.js";
import {
  GRANTED,
  HELD_BASE,
  NO_RECORD_EXPECTED,
  NOT_RENEWED,
  RECORD_NOT_WRITTEN,
  RECORD_VALUE_FIELD,
  RECORD_VERSION_FIELD,
  RENEW_REVOKED,
  RENEWED,
  TURN_BEHIND,
  TURN_GRANTED,
  WATCH_GRANTED,
  WATCH_RELEASED,
  WATCH_RELEASED_NO_TOKEN,
} from "./redis-codec.js";
import { CHANNEL_SUFFIX, LOCK_SUFFIX, REVOKED_SUFFIX, TURN_SUFFIX } from "./redis-keys.js";

/*
 * The Lua scripts, one call each. What they store, answer and publish is in redis-codec.ts;
 * the constants there are interpolated into the sources below.
 */

/**
 * Lua: `clock_start()` is the value a missing token counter starts from, the server's clock
 * (`TIME`) in microseconds, so a counter lost with the node's data (a restart without
 * persistence, FLUSHALL, an evicted key) starts again above every token it handed out, as long
 * as the server's clock did not go back and it handed out fewer than one token per
 * microsecond on average since it was created. `fmt(n)` prints a token: Lua's own conversion
 * of a number that large to text is in scientific notation.
 * Hot path: see docs/hot-path.md, "Redis".
 */
export const TOKEN_LUA = `
local function clock_start()
  local t = redis.call('TIME')
  return t[1] * 1000000 + t[2]
end
local function fmt(n) return string.format('%d', n) end
`;

/**
 * Lua: the base of lock key `lock` (a Lua expression), what the lock's channel names start
 * with (see redis-keys.ts). Hot path: see docs/hot-path.md, "Redis".
 */
function baseOf(lock: string): string {
  return `string.sub(${lock}, 1, -${LOCK_SUFFIX.length + 1})`;
}

/**
 * Acquire on one node, in one call: `INCR` of the lock's token counter, whose new value is the
 * fencing token stored inside the payload, then `SET lock payload NX PX ttl`; when the SET
 * fails the counter is put back (`DECR`: a script runs alone, so nobody sees the step). One
 * call fewer on the uncontended path than reading the counter first. A counter that was
 * missing (`INCR` answers 1) is set to `clock_start()` first.
 * Hot path: see docs/hot-path.md, "Redis".
 *
 * Waiters stand in a line (a sorted set by arrival, see {@link RELEASE}): a release hands the
 * lock straight to the first of them, so a waiter normally never tries again.
 *
 * KEYS: lock, counter, and for a waiting try the waiters. ARGV: owner prefix (`<session id>:`,
 * or `<session id>.<wait>:` in a wait), ttl ms, payload tail (`\n<owner>[\n<value>]`), then for
 * a waiting try: its line entry and `1` if it may be in the line (leave it on a grant). A
 * waiting try that fails joins the line (by the server's clock; the line expires 3 TTLs after
 * the last join, so a crashed waiter's entry goes), unless a release has handed the lock to
 * this wait already (its message not yet seen): then that grant's token is returned. A
 * waiting try reads the lock first, so one that finds it held takes no token (no `INCR` and
 * `DECR`): joining the line is `GET`, `TIME`, `ZADD`, `PEXPIRE` and `PTTL`. A grant is
 * announced on the watch channel (named after the lock key) as `g<ttl>`.
 * Returns the token (>= 1) when granted; otherwise the holder's remaining lease, encoded as
 * `decodeAcquireReply` reads it.
 */
export const ACQUIRE = new LuaScript(`${TOKEN_LUA}
if ARGV[4] then
  local v = redis.call('GET', KEYS[1])
  if v then
    if string.sub(v, 1, #ARGV[1]) == ARGV[1] then
      local nl = string.find(v, '\\n', #ARGV[1] + 1, true)
      local mine = nl and tonumber(string.sub(v, #ARGV[1] + 1, nl - 1))
      if mine then return mine end
    end
    local t = redis.call('TIME')
    redis.call('ZADD', KEYS[3], 'NX', t[1] * 1000000 + t[2], ARGV[4])
    redis.call('PEXPIRE', KEYS[3], 3 * tonumber(ARGV[2]))
    return ${HELD_BASE} - redis.call('PTTL', KEYS[1])
  end
end
local token = redis.call('INCR', KEYS[2])
if token == 1 then
  token = clock_start()
  redis.call('SET', KEYS[2], fmt(token))
end
if redis.call('SET', KEYS[1], ARGV[1] .. fmt(token) .. ARGV[3], 'NX', 'PX', ARGV[2]) then
  if ARGV[5] == '1' then redis.call('ZREM', KEYS[3], ARGV[4]) end
  redis.call('PUBLISH', ${baseOf("KEYS[1]")} .. '${CHANNEL_SUFFIX}', '${WATCH_GRANTED}' .. ARGV[2])
  return token
end
redis.call('DECR', KEYS[2])
return ${HELD_BASE} - redis.call('PTTL', KEYS[1])
`);

/**
 * Redlock acquire on one node: `SET lock payload NX PX ttl`, no counter (Redlock has no
 * fencing token). KEYS: lock. ARGV: payload, ttl ms.
 * Returns `GRANTED`, or the holder's remaining lease as the acquire script encodes it.
 */
export const ACQUIRE_NO_TOKEN = new LuaScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return ${GRANTED}
end
return ${HELD_BASE} - redis.call('PTTL', KEYS[1])
`);

/**
 * Lua: sets `out` (a Lua place) to the renewal's answer for lock key `key` not renewed by
 * owner prefix `prefix`: `r<reason>` when an operator force-released that grant (its
 * revocation is still kept, see {@link FORCE_RELEASE}), else `NOT_RENEWED`. Read only when the
 * key was not renewed, so a renewal where nothing was revoked does no more work. Hot path:
 * see docs/hot-path.md, "Redis".
 */
export function notRenewedLua(out: string, key: string, prefix: string): string {
  return `local why = redis.call('HGET', ${baseOf(key)} .. '${REVOKED_SUFFIX}', ${prefix})
    ${out} = why and ('${RENEW_REVOKED}' .. why) or ${NOT_RENEWED}`;
}

/**
 * Renews every lock of a session in one call: an owner-checked PEXPIRE per key.
 * KEYS: lock keys. ARGV: ttl ms, then one owner prefix per key.
 * Returns one `RENEWED` or `NOT_RENEWED` (no longer this grant's) per key, in order, or for a
 * grant an operator force-released `r<reason>` (see `decodeRenewals`).
 */
export const RENEW = new LuaScript(`
local out = {}
for i, key in ipairs(KEYS) do
  local prefix = ARGV[i + 1]
  local v = redis.call('GET', key)
  if v and string.sub(v, 1, #prefix) == prefix then
    redis.call('PEXPIRE', key, ARGV[1])
    out[i] = ${RENEWED}
  else
    ${notRenewedLua("out[i]", "key", "prefix")}
  end
end
return out
`);

/**
 * Lua: the release of lock key `lock` (Lua expressions, as the other three), once its owner
 * was checked: the lock is handed to the first waiter of line `waiters` that hears (any
 * waiter when `skip` is not `'1'`), with the next token of counter `counter` (`INCR`, put
 * back when nobody heard), by overwriting the key; with nobody in line the key is deleted.
 * Watchers are told. What {@link RELEASE} does per key, and {@link FORCE_RELEASE} the same way.
 */
function handOverLua(lock: string, waiters: string, counter: string, skip: string): string {
  return `    local turn
    local handed = false
    while true do
      local entry = redis.call('ZPOPMIN', ${waiters})[1]
      if not entry then break end
      local dot = string.find(entry, '.', 1, true)
      local colon = dot and string.find(entry, ':', dot, true)
      local nl = colon and string.find(entry, '\\n', colon, true)
      local ttl = nl and tonumber(string.sub(entry, colon + 1, nl - 1))
      if ttl and ttl > 0 then
        local token = redis.call('INCR', ${counter})
        if token == 1 then
          token = clock_start()
          redis.call('SET', ${counter}, fmt(token))
        end
        turn = turn or ${baseOf(lock)} .. '${TURN_SUFFIX}'
        local heard = redis.call('PUBLISH', turn .. string.sub(entry, 1, dot - 1),
          '${TURN_GRANTED}' .. string.sub(entry, dot + 1, colon - 1) .. ':' .. fmt(token))
        if heard > 0 or ${skip} ~= '1' then
          redis.call('SET', ${lock}, string.sub(entry, 1, colon) .. fmt(token) .. string.sub(entry, nl),
            'PX', ttl)
          local second = redis.call('ZRANGE', ${waiters}, 0, 0)[1]
          local sdot = second and string.find(second, '.', 1, true)
          local scolon = sdot and string.find(second, ':', sdot, true)
          local snl = scolon and string.find(second, '\\n', scolon, true)
          local sttl = snl and tonumber(string.sub(second, scolon + 1, snl - 1))
          if sdot and not (sttl and sttl <= ttl) then
            redis.call('PUBLISH', turn .. string.sub(second, 1, sdot - 1), '${TURN_BEHIND}' .. ttl)
          end
          handed = true
          break
        end
        redis.call('DECR', ${counter})
      end
    end
    if not handed then redis.call('DEL', ${lock}) end
    redis.call('PUBLISH', ${baseOf(lock)} .. '${CHANNEL_SUFFIX}', '${WATCH_RELEASED}')
`;
}

/**
 * Owner-checked release of one or more locks, each handed straight to the first waiter in its
 * line: the lock is set to that wait's payload with the next token and the waiter's TTL (from
 * its line entry), and the waiter is told on its turn channel (`g<wait>:<token>`). The
 * session of a waiting wait renews the lock key by the wait's prefix from the start, so the
 * lease is covered before the waiter hears. A waiter that does not hear (its process is gone)
 * is skipped. The waiter behind it is told the new holder's TTL (`b<ms>`), to look again then
 * should that one be frozen, when that TTL is shorter than the waiter's own: a waiter sleeps
 * at most its own TTL, so with equal TTLs it looks in time anyway, and the release wakes one
 * process, not two. Watchers are told on the watch channel (`r`). The channels are
 * named after the lock key. The next token is the counter's value plus one, or
 * `clock_start()` when the counter is missing.
 * KEYS: lock keys, then the waiters keys, then the counter keys. ARGV: `1` to skip waiters who
 * do not hear (a PUBLISH count is per node: not on a Cluster), then one owner prefix per key.
 * Returns how many keys were this session's grants and are released.
 */
export const RELEASE = new LuaScript(`${TOKEN_LUA}
local n = #KEYS / 3
local released = 0
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  local prefix = ARGV[1 + i]
  if v and string.sub(v, 1, #prefix) == prefix then
${handOverLua("KEYS[i]", "KEYS[n + i]", "KEYS[2 * n + i]", "ARGV[1]")}    released = released + 1
  end
end
return released
`);

/**
 * Owner-checked release of one lock, announced on its channel (Redlock: no line of waiters).
 * KEYS: lock. ARGV: owner prefix, channel. Returns 1 when released, 0 when not this grant's.
 */
export const RELEASE_ONE = new LuaScript(`
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], '${WATCH_RELEASED_NO_TOKEN}')
  return 1
end
return 0
`);

/**
 * The holder's payload and remaining lease, read together. KEYS: lock.
 * Returns `{payload or false, pttl}` (see `decodeHolderReply`).
 */
export const READ_HOLDER = new LuaScript(`
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
`);

/**
 * The compare-and-set of a durable record (a hash of value and version, see redis-codec.ts),
 * in one call. KEYS: the record key. ARGV: the expected version (`NO_RECORD_EXPECTED`: only if
 * there is no record), the value. When the stored version is the expected one (or there is no
 * record and none is expected), sets the value and a new version and answers it; the key gets
 * no expiry. The new version is the server's clock in microseconds, or the expected version
 * plus one when that is greater (`clock_start()`, as for token counters): a record lost with
 * the node's data (a restart without persistence, FLUSHALL) starts again above every version
 * it had, so a write expecting a version from before the loss never matches the record a
 * newer writer created after it. A record that already holds this value at a version above
 * the expected one is this write run again (ioredis sends a command again after a connection
 * reset on a Cluster, and so may an application's own client; core's values carry the
 * writer's token, so two writers never write the same bytes): it answers that version and
 * writes nothing. Otherwise answers `RECORD_NOT_WRITTEN` and writes nothing.
 */
export const WRITE_RECORD = new LuaScript(`${TOKEN_LUA}
local stored = redis.call('HMGET', KEYS[1], '${RECORD_VALUE_FIELD}', '${RECORD_VERSION_FIELD}')
local version = stored[2]
local fresh = ARGV[1] == '${NO_RECORD_EXPECTED}'
if (fresh and not version) or (not fresh and version == ARGV[1]) then
  local next = clock_start()
  if not fresh and tonumber(ARGV[1]) + 1 > next then next = tonumber(ARGV[1]) + 1 end
  redis.call('HSET', KEYS[1], '${RECORD_VALUE_FIELD}', ARGV[2], '${RECORD_VERSION_FIELD}', fmt(next))
  return next
end
if version and stored[1] == ARGV[2] and (fresh or tonumber(version) > tonumber(ARGV[1])) then
  return tonumber(version)
end
return ${RECORD_NOT_WRITTEN}
`);

/**
 * The state of one lock for inspection, read together: the holder's payload and PTTL, how
 * many entries its line of waiters holds, and the first `ARGV[1]` of them in order.
 * KEYS: lock, waiters. Returns `{payload or false, pttl, count, entry, ...}` (see
 * `decodeLockInspection`).
 */
export const INSPECT_LOCK = new LuaScript(`
local out = {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('ZCARD', KEYS[2])}
if out[3] > 0 then
  for _, entry in ipairs(redis.call('ZRANGE', KEYS[2], 0, tonumber(ARGV[1]) - 1)) do
    out[#out + 1] = entry
  end
end
return out
`);

/**
 * An operator's forced release of the grant with token `ARGV[2]`, whoever holds it: when the
 * lock key holds that grant, its revocation is kept (`HSET` of the grant's owner prefix to the
 * reason `ARGV[3]` in the lock's revocations, which expire after three times the grant's
 * remaining lease, at least `ARGV[4]` ms), and the lock is released as {@link RELEASE} does:
 * handed to the first waiter in line with the next token, watchers told. The holder's next
 * renewal finds its grant gone and reads the reason (see {@link RENEW}).
 * KEYS: lock, waiters, counter, revocations. ARGV: `1` to skip waiters who do not hear (as
 * RELEASE), the token, the reason, the least time to keep the revocation in ms.
 * Returns 1 when that grant was freed, 0 when the key did not hold it.
 */
export const FORCE_RELEASE = new LuaScript(`${TOKEN_LUA}
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local nl = string.find(v, '\\n', 1, true)
local colon = nl and string.find(v, ':', 1, true)
if not colon or colon > nl or string.sub(v, colon + 1, nl - 1) ~= ARGV[2] then return 0 end
local keep = math.max(3 * redis.call('PTTL', KEYS[1]), tonumber(ARGV[4]))
redis.call('HSET', KEYS[4], string.sub(v, 1, nl), ARGV[3])
redis.call('PEXPIRE', KEYS[4], keep)
do
${handOverLua("KEYS[1]", "KEYS[2]", "KEYS[3]", "ARGV[1]")}end
return 1
`);

/**
 * Redlock: an operator's forced release of one grant on one node, by the grant's owner prefix
 * (`<session id>:<grant id>\n`, read from a quorum's payload): when the node holds that grant,
 * its revocation is kept as {@link FORCE_RELEASE} keeps it (the holder's `RENEW` reads it
 * there), the key deleted and the release announced on its channel.
 * KEYS: lock, revocations. ARGV: grant prefix, reason, least time to keep the revocation in
 * ms, channel. Returns 1 when this node held that grant and freed it, else 0.
 */
export const FORCE_RELEASE_ONE = new LuaScript(`
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1]) ~= ARGV[1] then return 0 end
local keep = math.max(3 * redis.call('PTTL', KEYS[1]), tonumber(ARGV[3]))
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], keep)
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[4], '${WATCH_RELEASED_NO_TOKEN}')
return 1
`);
