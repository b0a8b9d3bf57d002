/** The Redis keys and channel of one lock. */
export interface LockKeys {
  /** The lock key: holds the grant's payload, with the lease as its PX expiry. */
  readonly lock: string;
  /** The fencing counter (INCR), never expires. */
  readonly token: string;
  /** The pub/sub channel a release is announced on. */
  readonly channel: string;
}

/**
 * Key names of lock `name` under `prefix`: `<prefix>{<name>}:lock`, `<prefix>{<name>}:token`,
 * channel `<prefix>{<name>}:released`. The hash tag `{<name>}` puts every key of one lock in
 * the same Redis Cluster slot, so the scripts touching them run on one node. Braces and `%` in
 * the name are percent-encoded, so a name can never end the hash tag early (or empty it).
 */
export function lockKeys(prefix: string, name: string): LockKeys {
  const base = `${prefix}{${escapeBraces(name)}}`;
  return { lock: `${base}:lock`, token: `${base}:token`, channel: `${base}:released` };
}

function escapeBraces(name: string): string {
  return name.replace(/[%{}]/g, (c) => (c === "%" ? "%25" : c === "{" ? "%7B" : "%7D"));
}
