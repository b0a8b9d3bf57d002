/**
 * The Redis keys and channels of one lock, every name the adapter writes in Redis:
 * `<prefix>{<name>}:lock`, `:token`, `:waiters`, channels `:released` and
 * `:turn:<session id>` (what is stored and sent there: see `redis-codec.ts`). The hash tag
 * `{<name>}` puts every key of one lock in the same Redis Cluster slot, so the scripts
 * touching them run on one node. Only the lock key is kept (renewals use it); the others are
 * built when used (a durable record's key: {@link recordKey}). Hot path: see docs/hot-path.md,
 * "Redis".
 */
export class LockKeys {
  /** `<prefix>{<name>}`: what every key of this lock starts with. */
  readonly base: string;
  /** The lock key: holds the grant's payload, with the lease as its PX expiry. */
  readonly lock: string;

  constructor(base: string) {
    this.base = base;
    this.lock = `${base}${LOCK_SUFFIX}`;
  }

  /** The fencing counter (INCR), never expires. */
  get token(): string {
    return `${this.base}:token`;
  }

  /** The pub/sub channel every release and grant is announced on, for watchers. */
  get channel(): string {
    return `${this.base}${CHANNEL_SUFFIX}`;
  }

  /** The waiters in line: a sorted set of line entries by arrival time. */
  get waiters(): string {
    return `${this.base}${WAITERS_SUFFIX}`;
  }

  /**
   * The revocations of forced releases (a hash: grant prefix to the reason given), read by the
   * holder's renewal when its grant is gone; it expires a few TTLs after the last one.
   */
  get revoked(): string {
    return `${this.base}${REVOKED_SUFFIX}`;
  }

  /**
   * Prefix of a waiter's own channel (plus its session id): its grant comes there. The
   * release script appends the session id of the wait it hands the lock to.
   */
  get turnPrefix(): string {
    return `${this.base}${TURN_SUFFIX}`;
  }

  /** The turn channel of the waits of session `sessionId`. */
  turn(sessionId: string): string {
    return `${this.base}${TURN_SUFFIX}${sessionId}`;
  }
}

/*
 * What the lock key, the watch channel and a turn channel prefix add to a lock's base. The
 * scripts build the channels from the lock key they are given (its base: the key without
 * `LOCK_SUFFIX`), so a call passes no channel names. Hot path: see docs/hot-path.md, "Redis".
 */

/** The lock key is `<base>:lock`. */
export const LOCK_SUFFIX = ":lock";
/** The watch channel is `<base>:released`. */
export const CHANNEL_SUFFIX = ":released";
/** A turn channel is `<base>:turn:<session id>`. */
export const TURN_SUFFIX = ":turn:";
/** The line of waiters is `<base>:waiters`. */
export const WAITERS_SUFFIX = ":waiters";
/** The revocations of forced releases are `<base>:revoked`; the renewal script builds the name. */
export const REVOKED_SUFFIX = ":revoked";

/**
 * The keys of lock `name` under `prefix` (see {@link LockKeys}). Braces and `%` in the name
 * are percent-encoded, so a name can never end the hash tag early (or empty it).
 */
export function lockKeys(prefix: string, name: string): LockKeys {
  return new LockKeys(`${prefix}{${escapeBraces(name)}}`);
}

const SPECIAL = /[%{}]/;

function escapeBraces(name: string): string {
  if (!SPECIAL.test(name)) return name;
  return name.replace(/[%{}]/g, (c) => (c === "%" ? "%25" : c === "{" ? "%7B" : "%7D"));
}

/**
 * The Redis keys and channel of one semaphore or read-write lock (a permit key), every one
 * under `<prefix>{<name>}:p`: `:q` the queue of holders and waiters (a sorted set by arrival),
 * `:e` the entries (a hash: each entry's permits, mode, token and holder, the key's limit
 * and counts, and each session's number of entries), `:s` the sessions with entries (a sorted
 * set by lease deadline), `:token` the fencing counter and `:w` the newest write's token (the
 * two never expire), and channels `:turn:<session id>`. What is stored and sent: see
 * `redis-codec.ts`. The hash tag is the name's, so a permit key lives in the slot of the lock
 * of the same name, but no name of a lock's (`:lock`, `:token`, `:waiters`, ...) starts with
 * `:p:`: the two never meet. Built when used (see docs/hot-path.md, "Redis").
 */
export class PermitKeys {
  /** `<prefix>{<name>}:p`: what every key of this permit key starts with. */
  readonly base: string;

  constructor(base: string) {
    this.base = base;
  }

  /** The queue: entry ids by arrival; the first `:g` of them are granted. */
  get queue(): string {
    return `${this.base}${PERMIT_QUEUE_SUFFIX}`;
  }

  /** The entries and the key's counts (a hash). */
  get entries(): string {
    return `${this.base}:e`;
  }

  /** The sessions with entries here, by lease deadline (server time in ms). */
  get sessions(): string {
    return `${this.base}${PERMIT_SESSIONS_SUFFIX}`;
  }

  /** The fencing counter (INCR), never expires. */
  get token(): string {
    return `${this.base}:token`;
  }

  /** The newest write's token, never expires: what a read carries. */
  get writeToken(): string {
    return `${this.base}:w`;
  }

  /**
   * The revocations of forced releases (a hash: entry id to the reason given), read by the
   * renewal of the sessions that held them; it expires a few TTLs after the last one.
   */
  get revoked(): string {
    return `${this.base}${PERMIT_REVOKED_SUFFIX}`;
  }

  /** Every key a permit script takes, in the order the scripts take them. */
  get all(): [string, string, string, string, string] {
    return [this.queue, this.entries, this.sessions, this.token, this.writeToken];
  }

  /** The turn channel of the waits of session `sessionId` on this key. */
  turn(sessionId: string): string {
    return `${this.base}${TURN_SUFFIX}${sessionId}`;
  }
}

/** The queue key of a permit key is `<base>:q`; its turn channels are named from that base. */
export const PERMIT_QUEUE_SUFFIX = ":q";
/** The sessions key of a permit key is `<base>:s`; the renewal builds the revocations' from it. */
export const PERMIT_SESSIONS_SUFFIX = ":s";
/** The revocations of a permit key are `<base>:r`. */
export const PERMIT_REVOKED_SUFFIX = ":r";
/** What a permit key's base adds to the name's hash tag: `<prefix>{<name>}:p`. */
const PERMIT_BASE_SUFFIX = ":p";

/** The keys of permit key `name` under `prefix` (see {@link PermitKeys}). */
export function permitKeys(prefix: string, name: string): PermitKeys {
  return new PermitKeys(`${prefix}{${escapeBraces(name)}}${PERMIT_BASE_SUFFIX}`);
}

/**
 * The key of durable record `key` under `prefix`: `<prefix>records:{<key>}`, a hash (what it
 * holds: see `redis-codec.ts`) that never expires. One key per record, so the script that
 * writes it runs on one Cluster node; the hash tag is the record's name, encoded as a lock
 * name is, so a record lives in the slot of the lock of the same name. No lock key starts
 * with `<prefix>records:` (theirs start with `<prefix>{`), so the two never meet.
 */
export function recordKey(prefix: string, key: string): string {
  return `${prefix}${RECORDS_START}{${escapeBraces(key)}}`;
}

/** What a record key adds to the prefix before its hash tag. */
const RECORDS_START = "records:";

/**
 * Listing (inspection): the SCAN pattern of one key space's keys under `prefix` whose names
 * start with `namePrefix`, and how a scanned key gives its name back. A lock is listed by its
 * lock key, or by its line of waiters while it has no holder; a permit key by its queue (it
 * exists while the key has holders or waiters); a record by its key.
 */
export interface KeySpaceLayout {
  /** The SCAN MATCH pattern (glob characters of the prefix and name escaped). */
  readonly pattern: string;
  /** The name a scanned key stands for, or `undefined` when it is no key of this space. */
  nameOf(key: string): string | undefined;
}

/** The listing layout of `space` under `prefix`, for names starting with `namePrefix`. */
export function keySpaceLayout(
  prefix: string,
  space: "lock" | "permit" | "record",
  namePrefix: string,
): KeySpaceLayout {
  const start = space === "record" ? `${prefix}${RECORDS_START}{` : `${prefix}{`;
  const ends =
    space === "lock"
      ? [`}${LOCK_SUFFIX}`, `}${WAITERS_SUFFIX}`]
      : space === "permit"
        ? [`}${PERMIT_BASE_SUFFIX}${PERMIT_QUEUE_SUFFIX}`]
        : ["}"];
  const tail = space === "lock" ? "}:[lw]*" : escapeGlob(ends[0] as string);
  return {
    pattern: `${escapeGlob(start)}${escapeGlob(escapeBraces(namePrefix))}*${tail}`,
    nameOf(key) {
      if (!key.startsWith(start)) return undefined;
      const end = ends.find((e) => key.endsWith(e));
      if (end === undefined || key.length < start.length + end.length) return undefined;
      const escaped = key.slice(start.length, key.length - end.length);
      // A name's braces are escaped (see lockKeys): a raw one means another key's layout.
      if (escaped.includes("{") || escaped.includes("}")) return undefined;
      return unescapeBraces(escaped);
    },
  };
}

/** Whether a key a lock listing found is the lock's line of waiters (not its lock key). */
export function isWaitersKey(key: string): boolean {
  return key.endsWith(WAITERS_SUFFIX);
}

/** The lock key of the lock whose line of waiters is `waitersKey`. */
export function lockKeyOfWaiters(waitersKey: string): string {
  return `${waitersKey.slice(0, -WAITERS_SUFFIX.length)}${LOCK_SUFFIX}`;
}

function unescapeBraces(escaped: string): string {
  if (!escaped.includes("%")) return escaped;
  return escaped.replace(/%(25|7B|7D)/g, (_, c: string) =>
    c === "25" ? "%" : c === "7B" ? "{" : "}",
  );
}

/** `text` with SCAN's glob characters (`* ? [ ] \`) escaped, to match itself. */
function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}
