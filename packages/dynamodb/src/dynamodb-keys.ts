/**
 * The item layout in the table: every item has one string partition key, {@link PARTITION_KEY}
 * (`pk`), and no sort key. Its value says what the item is:
 *
 * - `<prefix>lock:<name>`: a lock. It keeps the fencing counter for good, and the holding
 *   session's id while held.
 * - `<prefix>session:<id>`: a session, renewed by a counter that every renewal raises.
 * - `<prefix>record:<key>`: a durable record of `runOnce` and `schedule`.
 *
 * The three kinds start with different words after the prefix, so no name or key of one kind
 * is an item of another, whatever it holds.
 */

/** The table's partition key attribute (type `S`); the table has no sort key. */
export const PARTITION_KEY = "pk";

/** The partition key of lock `name`. */
export function lockKey(prefix: string, name: string): string {
  return `${prefix}lock:${name}`;
}

/** The partition key of session `id`. */
export function sessionKey(prefix: string, id: string): string {
  return `${prefix}session:${id}`;
}

/** The partition key of record `key`. */
export function recordKey(prefix: string, key: string): string {
  return `${prefix}record:${key}`;
}
