import { LuaScript } from "./lua-script.js";
import {
  ARRIVALS_FIELD,
  GRANTED_FIELD,
  HELD_FIELD,
  LIMIT_FIELD,
  MODE_CODES,
  NOT_RENEWED,
  OWNER_END,
  PERMIT_GRANTED,
  PERMIT_NOT_GRANTED,
  PERMIT_OTHER_LIMIT,
  RENEWED,
  TURN_GRANTED,
  WAITING_FIELD,
} from "./redis-codec.js";
import {
  PERMIT_QUEUE_SUFFIX,
  PERMIT_REVOKED_SUFFIX,
  PERMIT_SESSIONS_SUFFIX,
  TURN_SUFFIX,
} from "./redis-keys.js";
import { notRenewedLua, TOKEN_LUA } from "./scripts.js";

/*
 * The Lua scripts of permit keys (semaphores and read-write locks), one call each. What they
 * store and answer is in redis-codec.ts ("Permit keys"); the keys they take are
 * `PermitKeys.all` (queue, entries, sessions, counter, write token), in that order.
 */

/**
 * Lua shared by the permit scripts: the key's state in locals (`st`: limit, held permits,
 * granted and waiting entries, arrivals), loaded from one `HMGET` and written back with one
 * `HSET` (`save`), or the keys deleted when the queue is empty (the limit goes with them);
 * per-session entry counts (`counts`); the server's time in ms (`now`, read once);
 * `sweep()`, which drops the entries of every session whose lease deadline has passed (every
 * script on the key runs it first, so a dead session's permits go within its TTL); `admit()`,
 * which grants waiters from the front of the queue while the permits ahead of them plus
 * theirs fit the limit (never one behind a waiter that does not fit) and tells each on its
 * session's turn channel (`g<n>:<token>`); `mint(mode)`, the grant's token: the counter's
 * next value for a permit or a write (a write also becomes the newest write), the newest
 * write's for a read (`0` when none).
 */
const PERMIT_LUA = `
local Q, E, S, C, W = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local st = {}
local counts = {}
local dirty = false
local now_ms
local function now()
  if not now_ms then
    local t = redis.call('TIME')
    now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
  end
  return now_ms
end
local function load(m)
  st.l = tonumber(m[1])
  st.h = tonumber(m[2]) or 0
  st.g = tonumber(m[3]) or 0
  st.w = tonumber(m[4]) or 0
  st.n = tonumber(m[5]) or 0
end
local function parse(d)
  local a = string.find(d, '${OWNER_END}', 1, true)
  local b = string.find(d, '${OWNER_END}', a + 1, true)
  local nl = string.find(d, '\\n', b + 1, true)
  return tonumber(string.sub(d, 1, a - 1)), string.sub(d, a + 1, b - 1),
    string.sub(d, b + 1, nl - 1), string.sub(d, nl)
end
local function entry(p, mode, token, tail)
  return fmt(p) .. '${OWNER_END}' .. mode .. '${OWNER_END}' .. token .. tail
end
local function session_of(id)
  return string.sub(id, 1, string.find(id, '.', 1, true) - 1)
end
local function count(sid, delta)
  local c = counts[sid]
  if c == nil then c = tonumber(redis.call('HGET', E, sid)) or 0 end
  counts[sid] = c + delta
end
local function mint(mode)
  if mode == '${MODE_CODES.read}' then return redis.call('GET', W) or '0' end
  local token = redis.call('INCR', C)
  if token == 1 then
    token = clock_start()
    redis.call('SET', C, fmt(token))
  end
  local text = fmt(token)
  if mode == '${MODE_CODES.write}' then redis.call('SET', W, text) end
  return text
end
local function drop(id, d)
  redis.call('ZREM', Q, id)
  redis.call('HDEL', E, id)
  dirty = true
  count(session_of(id), -1)
  if not d then return false end
  local p, _, token = parse(d)
  if token ~= '' then
    st.h = st.h - p
    st.g = st.g - 1
    return true
  end
  st.w = st.w - 1
  return false
end
local turn = string.sub(Q, 1, -${PERMIT_QUEUE_SUFFIX.length + 1}) .. '${TURN_SUFFIX}'
local function admit()
  while st.w > 0 do
    local id = redis.call('ZRANGE', Q, st.g, st.g)[1]
    if not id then break end
    local d = redis.call('HGET', E, id)
    if not d then
      drop(id, false)
      st.w = st.w - 1
    else
      local p, mode, _, tail = parse(d)
      if st.h + p > st.l then break end
      local token = mint(mode)
      redis.call('HSET', E, id, entry(p, mode, token, tail))
      st.h = st.h + p
      st.g = st.g + 1
      st.w = st.w - 1
      dirty = true
      local dot = string.find(id, '.', 1, true)
      redis.call('PUBLISH', turn .. string.sub(id, 1, dot - 1),
        '${TURN_GRANTED}' .. string.sub(id, dot + 1) .. '${OWNER_END}' .. token)
    end
  end
end
local function sweep()
  local dead = redis.call('ZRANGEBYSCORE', S, '-inf', now())
  if #dead == 0 then return false end
  local gone = {}
  for _, sid in ipairs(dead) do
    redis.call('ZREM', S, sid)
    gone[sid] = true
  end
  for _, id in ipairs(redis.call('ZRANGE', Q, 0, -1)) do
    if gone[session_of(id)] then drop(id, redis.call('HGET', E, id)) end
  end
  for sid in pairs(gone) do counts[sid] = 0 end
  dirty = true
  admit()
  return true
end
local function next_deadline()
  local first = redis.call('ZRANGE', S, 0, 0, 'WITHSCORES')
  if not first[2] then return -1 end
  return math.max(0, tonumber(first[2]) - now())
end
local function save(extra)
  if st.g + st.w <= 0 then
    redis.call('DEL', Q, E, S)
    return
  end
  local args = {'${LIMIT_FIELD}', fmt(st.l), '${HELD_FIELD}', fmt(st.h), '${GRANTED_FIELD}', st.g,
    '${WAITING_FIELD}', st.w, '${ARRIVALS_FIELD}', st.n}
  for sid, c in pairs(counts) do
    if c > 0 then
      args[#args + 1] = sid
      args[#args + 1] = c
    else
      redis.call('HDEL', E, sid)
      redis.call('ZREM', S, sid)
    end
  end
  if extra then
    args[#args + 1] = extra[1]
    args[#args + 1] = extra[2]
  end
  redis.call('HSET', E, unpack(args))
end
`;

/**
 * Lua: `m`, the entries hash's state fields, then the count of session `sid` and the entry
 * `field` (`m[6]`, `m[7]`), read before the helpers are defined so that a script's fast
 * path returns without them (see docs/hot-path.md, "Redis").
 */
function readState(sid: string, field: string): string {
  return `local m = redis.call('HMGET', KEYS[2], '${LIMIT_FIELD}', '${HELD_FIELD}', '${GRANTED_FIELD}',
  '${WAITING_FIELD}', '${ARRIVALS_FIELD}', ${sid}, ${field})`;
}

/** Lua, after the helpers: `st` and the count of session `sid` from `m` (see readState). */
function loadState(sid: string): string {
  return `load(m)
counts[${sid}] = tonumber(m[6]) or 0`;
}

/**
 * Acquires permits of a permit key in one call. ARGV: the entry id (the wait id
 * `<session id>.<n>`), the session id, the session's TTL in ms, the limit, the permits, the
 * mode's code, the holder tail (`\n<owner>[\n<value>]`), `1` to wait in the queue when
 * not granted (or `""`: a single try that leaves nothing behind), and `1` when the session
 * holds grants there (or `""`).
 *
 * When the stored limit differs (after the sweep: a key whose sessions all died has none)
 * answers `{PERMIT_OTHER_LIMIT, limit}` and adds nothing. An entry already in the queue (a
 * waiter looking again) answers its grant or that it still waits. Otherwise the request is
 * granted when nobody waits and the held permits plus its own fit the limit (the prefix
 * rule: every entry ahead of it is granted). A grant or a new waiter puts the entry at the
 * end of the queue, counts it for its session, and sets the session's lease deadline to now
 * plus its TTL. Answers `{PERMIT_GRANTED, token, lost}`, or `{PERMIT_NOT_GRANTED, ms, lost}`
 * with the time until the earliest lease deadline there (when a waiter should look again,
 * should nobody tell it sooner); `lost` is 1 when the session holds grants there but the
 * store has no entry of it (they went with the store's data, or with its lease), else 0. A grant when nobody waits and no lease has run out is the fast
 * path, before the helpers: `HMGET`, `INCR`, `TIME`, two `ZADD`s and one `HSET` (and one
 * `ZRANGE` for the earliest deadline when the key has holders). Hot path: see
 * docs/hot-path.md, "Redis".
 */
export const ACQUIRE_PERMITS = new LuaScript(`${TOKEN_LUA}
${readState("ARGV[2]", "ARGV[1]")}
local stored, now = tonumber(m[1]), nil
local lost = 0
if ARGV[9] == '1' and not m[6] then lost = 1 end
local fast = not stored
if stored == tonumber(ARGV[4]) and not m[7] and tonumber(m[4]) == 0
    and tonumber(m[2]) + tonumber(ARGV[5]) <= stored then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
  local first = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  fast = first[2] ~= nil and tonumber(first[2]) > now
end
if fast then
  local text
  if ARGV[6] == '${MODE_CODES.read}' then
    text = redis.call('GET', KEYS[5]) or '0'
  else
    local token = redis.call('INCR', KEYS[4])
    if token == 1 then
      token = clock_start()
      redis.call('SET', KEYS[4], fmt(token))
    end
    text = fmt(token)
    if ARGV[6] == '${MODE_CODES.write}' then redis.call('SET', KEYS[5], text) end
  end
  if not now then
    local t = redis.call('TIME')
    now = t[1] * 1000 + math.floor(t[2] / 1000)
  end
  local n = (tonumber(m[5]) or 0) + 1
  redis.call('ZADD', KEYS[1], n, ARGV[1])
  redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), ARGV[2])
  redis.call('HSET', KEYS[2], '${LIMIT_FIELD}', ARGV[4],
    '${HELD_FIELD}', fmt((tonumber(m[2]) or 0) + tonumber(ARGV[5])),
    '${GRANTED_FIELD}', (tonumber(m[3]) or 0) + 1, '${WAITING_FIELD}', 0, '${ARRIVALS_FIELD}', n,
    ARGV[2], (tonumber(m[6]) or 0) + 1,
    ARGV[1], ARGV[5] .. '${OWNER_END}' .. ARGV[6] .. '${OWNER_END}' .. text .. ARGV[7])
  return {${PERMIT_GRANTED}, text, lost}
end
${PERMIT_LUA}
local id, sid, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local limit, permits, mode, tail = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6], ARGV[7]
${loadState("sid")}
local mine = m[7]
if st.l and sweep() then mine = redis.call('HGET', E, id) end
if ARGV[9] == '1' and counts[sid] == 0 then lost = 1 end
if st.g + st.w <= 0 then st.l = nil end
if st.l and st.l ~= limit then
  if dirty then save() end
  return {${PERMIT_OTHER_LIMIT}, fmt(st.l), lost}
end
if mine then
  if dirty then save() end
  local _, _, token = parse(mine)
  if token ~= '' then return {${PERMIT_GRANTED}, token, lost} end
  return {${PERMIT_NOT_GRANTED}, next_deadline(), lost}
end
local granted = st.w == 0 and st.h + permits <= limit
if not granted and ARGV[8] ~= '1' then
  if dirty then save() end
  return {${PERMIT_NOT_GRANTED}, -1, lost}
end
local token = ''
if granted then
  token = mint(mode)
  st.h = st.h + permits
  st.g = st.g + 1
else
  st.w = st.w + 1
end
st.l = limit
st.n = st.n + 1
redis.call('ZADD', Q, st.n, id)
redis.call('ZADD', S, now() + ttl, sid)
count(sid, 1)
save({id, entry(permits, mode, token, tail)})
if granted then return {${PERMIT_GRANTED}, token, lost} end
return {${PERMIT_NOT_GRANTED}, next_deadline(), lost}
`);

/**
 * Releases entries of one session on a permit key, granted or waiting, in one call, and
 * grants the waiters that now fit. ARGV: the session id, then the entry ids (none: every
 * entry of that session, as a closing session asks). The fast paths, before the helpers:
 * the last entry of a key deletes its keys (`HMGET` and `DEL`, nothing else); one granted
 * entry while nobody waits and no lease has run out is taken out with a few commands (hot
 * path: see docs/hot-path.md, "Redis"). Answers how many of them were granted (and are
 * released).
 */
export const RELEASE_PERMITS = new LuaScript(`${TOKEN_LUA}
${readState("ARGV[1]", `ARGV[2] or '${ARRIVALS_FIELD}'`)}
if not m[1] then return 0 end
if #ARGV == 2 and m[7] then
  local granted = string.find(m[7], '^%d+${OWNER_END}%a${OWNER_END}%d') ~= nil
  if tonumber(m[3]) + tonumber(m[4]) == 1 then
    redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
    if granted then return 1 end
    return 0
  end
  if granted and tonumber(m[4]) == 0 then
    local t = redis.call('TIME')
    local first = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
    if first[2] ~= nil and tonumber(first[2]) > t[1] * 1000 + math.floor(t[2] / 1000) then
      redis.call('ZREM', KEYS[1], ARGV[2])
      local left = tonumber(m[6]) - 1
      local held = fmt(tonumber(m[2]) - tonumber(string.match(m[7], '^%d+')))
      if left > 0 then
        redis.call('HSET', KEYS[2], '${HELD_FIELD}', held, '${GRANTED_FIELD}', tonumber(m[3]) - 1,
          ARGV[1], left)
        redis.call('HDEL', KEYS[2], ARGV[2])
      else
        redis.call('HSET', KEYS[2], '${HELD_FIELD}', held, '${GRANTED_FIELD}', tonumber(m[3]) - 1)
        redis.call('HDEL', KEYS[2], ARGV[2], ARGV[1])
        redis.call('ZREM', KEYS[3], ARGV[1])
      end
      return 1
    end
  end
end
${PERMIT_LUA}
local sid = ARGV[1]
${loadState("sid")}
sweep()
local released = 0
if #ARGV == 1 then
  if counts[sid] > 0 then
    for _, id in ipairs(redis.call('ZRANGE', Q, 0, -1)) do
      if session_of(id) == sid and drop(id, redis.call('HGET', E, id)) then
        released = released + 1
      end
    end
  end
else
  for i = 2, #ARGV do
    local d = redis.call('HGET', E, ARGV[i])
    if d and drop(ARGV[i], d) then released = released + 1 end
  end
end
if dirty then
  admit()
  save()
end
return released
`);

/**
 * Turns a granted write entry into a read of 1 permit with the same token, in one call, and
 * grants the waiters that now fit (reads queued behind it). ARGV: the session id, the entry
 * id. Answers the token, or `false` when the entry is no granted write (no longer there).
 */
export const DOWNGRADE_PERMITS = new LuaScript(`${TOKEN_LUA}
${readState("ARGV[1]", "ARGV[2]")}
if not m[1] then return false end
${PERMIT_LUA}
${loadState("ARGV[1]")}
local d = m[7]
if sweep() then d = redis.call('HGET', E, ARGV[2]) end
local out = false
if d then
  local p, mode, token, tail = parse(d)
  if mode == '${MODE_CODES.write}' and token ~= '' then
    st.h = st.h - p + 1
    redis.call('HSET', E, ARGV[2], entry(1, '${MODE_CODES.read}', token, tail))
    dirty = true
    admit()
    out = token
  end
end
if dirty then save() end
return out
`);

/**
 * The granted entries of a permit key, in grant order, after the sweep: answers
 * `{now, id, entry, deadline, ...}` (server time and each holder's session lease deadline,
 * in ms). No ARGV.
 */
export const PERMIT_HOLDERS = new LuaScript(`${TOKEN_LUA}
${readState(`'${ARRIVALS_FIELD}'`, `'${ARRIVALS_FIELD}'`)}
if not m[1] then return {0} end
${PERMIT_LUA}
load(m)
sweep()
if dirty then save() end
local out = {now()}
if st.g <= 0 then return out end
local deadlines = {}
for _, id in ipairs(redis.call('ZRANGE', Q, 0, st.g - 1)) do
  local sid = session_of(id)
  local deadline = deadlines[sid]
  if not deadline then
    deadline = redis.call('ZSCORE', S, sid) or '0'
    deadlines[sid] = deadline
  end
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', E, id) or ''
  out[#out + 1] = deadline
end
return out
`);

/**
 * Renews every lock and permit key of a session in one call: an owner-checked PEXPIRE per
 * lock key (as `RENEW`), and per permit key one `ZADD XX` of the session's lease deadline
 * (now plus its TTL), when that deadline has not passed: one command however many entries the
 * session has there. KEYS: lock keys, then the sessions keys of permit keys. ARGV: ttl ms,
 * the session id, then one owner prefix per lock key. Returns one `RENEWED` or `NOT_RENEWED`
 * per key, in order (a permit key is not renewed when the session's entries there are gone).
 * A lock key force-released answers `r<reason>` instead (as `RENEW`); a permit key where an
 * operator force-released entries of this session answers `{code, entry id, reason, ...}` (its
 * revocations are read while the key has any: one `EXISTS` per permit key otherwise). Hot
 * path: see docs/hot-path.md, "Redis".
 */
export const RENEW_WITH_PERMITS = new LuaScript(`
local out = {}
local locks = #ARGV - 2
for i = 1, locks do
  local prefix = ARGV[i + 2]
  local v = redis.call('GET', KEYS[i])
  if v and string.sub(v, 1, #prefix) == prefix then
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
    out[i] = ${RENEWED}
  else
    ${notRenewedLua("out[i]", "KEYS[i]", "prefix")}
  end
end
if #KEYS > locks then
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  local mine = ARGV[2] .. '.'
  for i = locks + 1, #KEYS do
    local deadline = redis.call('ZSCORE', KEYS[i], ARGV[2])
    if deadline and tonumber(deadline) > now then
      redis.call('ZADD', KEYS[i], 'XX', now + tonumber(ARGV[1]), ARGV[2])
      out[i] = ${RENEWED}
    else
      out[i] = ${NOT_RENEWED}
    end
    local r = string.sub(KEYS[i], 1, -${PERMIT_SESSIONS_SUFFIX.length + 1}) .. '${PERMIT_REVOKED_SUFFIX}'
    if redis.call('EXISTS', r) == 1 then
      local revoked = {out[i]}
      local all = redis.call('HGETALL', r)
      for j = 1, #all, 2 do
        if string.sub(all[j], 1, #mine) == mine then
          revoked[#revoked + 1] = all[j]
          revoked[#revoked + 1] = all[j + 1]
        end
      end
      if #revoked > 1 then out[i] = revoked end
    end
  end
end
return out
`);

/**
 * The state of a permit key for inspection, after the sweep: answers `{now, limit, holders,
 * waiting, id, entry, deadline, ..., entry, ...}`: server time in ms, the stored limit, how
 * many granted entries follow (each as its id, its entry and its session's lease deadline in
 * ms, in grant order), how many entries wait, then the first `ARGV[1]` waiting entries in
 * queue order (see `decodePermitInspection`). `{0, 0, 0, 0}` when the key has no entry.
 */
export const INSPECT_PERMITS = new LuaScript(`${TOKEN_LUA}
${readState(`'${ARRIVALS_FIELD}'`, `'${ARRIVALS_FIELD}'`)}
if not m[1] then return {0, 0, 0, 0} end
${PERMIT_LUA}
load(m)
sweep()
if dirty then save() end
local out = {now(), st.l or 0, math.max(st.g, 0), math.max(st.w, 0)}
if st.g + st.w <= 0 then return {0, 0, 0, 0} end
local deadlines = {}
if st.g > 0 then
  for _, id in ipairs(redis.call('ZRANGE', Q, 0, st.g - 1)) do
    local sid = session_of(id)
    local deadline = deadlines[sid]
    if not deadline then
      deadline = redis.call('ZSCORE', S, sid) or '0'
      deadlines[sid] = deadline
    end
    out[#out + 1] = id
    out[#out + 1] = redis.call('HGET', E, id) or ''
    out[#out + 1] = deadline
  end
end
if st.w > 0 then
  for _, id in ipairs(redis.call('ZRANGE', Q, st.g, st.g + tonumber(ARGV[1]) - 1)) do
    out[#out + 1] = redis.call('HGET', E, id) or ''
  end
end
return out
`);

/**
 * An operator's forced release of the granted entries of a permit key whose token is
 * `ARGV[1]` (one grant; the reads of one write share its token, and go together), whoever
 * holds them, after the sweep: each is taken out as a release takes it, its revocation kept
 * (`HSET` of the entry id to the reason `ARGV[2]` in the key's revocations, which expire after
 * three times the longest remaining lease of the sessions that held them, at least `ARGV[3]`
 * ms), and the waiters that now fit are granted and told, as after a release. The sessions'
 * other entries live on; each learns it at its next renewal (see {@link RENEW_WITH_PERMITS}).
 * KEYS: `PermitKeys.all`, then the revocations. Answers how many entries were freed.
 */
export const FORCE_RELEASE_PERMITS = new LuaScript(`${TOKEN_LUA}
${readState(`'${ARRIVALS_FIELD}'`, `'${ARRIVALS_FIELD}'`)}
if not m[1] then return 0 end
${PERMIT_LUA}
load(m)
sweep()
local released = 0
local keep = tonumber(ARGV[3])
if st.g > 0 then
  for _, id in ipairs(redis.call('ZRANGE', Q, 0, st.g - 1)) do
    local d = redis.call('HGET', E, id)
    if d then
      local _, _, token = parse(d)
      if token == ARGV[1] then
        local deadline = tonumber(redis.call('ZSCORE', S, session_of(id))) or now()
        keep = math.max(keep, 3 * (deadline - now()))
        redis.call('HSET', KEYS[6], id, ARGV[2])
        drop(id, d)
        released = released + 1
      end
    end
  end
end
if released > 0 then redis.call('PEXPIRE', KEYS[6], keep) end
if dirty then
  admit()
  save()
end
return released
`);
