/** The Redis keys and channel of one lock. */
export interface LockKeys {
  /** The lock key: holds the grant's payload, with the lease as its PX expiry. */
  readonly lock: string;
  /** The fencing counter (INCR), never expires. */
  readonly token: string;
  /** The pub/sub channel every release and grant is announced on, for watchers. */
  readonly channel: string;
  /** The waiters in line: a sorted set of session ids by arrival time. */
  readonly waiters: string;
  /** The session id a release reserved the free lock for, with a short expiry. */
  readonly next: string;
  /** Prefix of a waiter's own channel (plus its session id): "your turn" comes there. */
  readonly turnPrefix: string;
}

/**
 * Key names of lock `name` under `prefix`: `<prefix>{<name>}:lock`, `<prefix>{<name>}:token`,
 * `<prefix>{<name>}:waiters`, `<prefix>{<name>}:next`, channels `<prefix>{<name>}:released`
 * and `<prefix>{<name>}:turn:<session id>`. The hash tag `{<name>}` puts every key of one lock in
 * the same Redis Cluster slot, so the scripts touching them run on one node. Braces and `%` in
 * the name are percent-encoded, so a name can never end the hash tag early (or empty it).
 */
export function lockKeys(prefix: string, name: string): LockKeys {
  const base = `${prefix}{${escapeBraces(name)}}`;
  return {
    lock: `${base}:lock`,
    token: `${base}:token`,
    channel: `${base}:released`,
    waiters: `${base}:waiters`,
    next: `${base}:next`,
    turnPrefix: `${base}:turn:`,
  };
}

const SPECIAL = /[%{}]/;

function escapeBraces(name: string): string {
  if (!SPECIAL.test(name)) return name;
  return name.replace(/[%{}]/g, (c) => (c === "%" ? "%25" : c === "{" ? "%7B" : "%7D"));
}
