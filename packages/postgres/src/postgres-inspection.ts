import {
  ConfigError,
  type ForceReleaseOptions,
  type KeyPage,
  type KeyState,
  type ListKeysOptions,
} from "@baton/core";
import {
  decodeHolder,
  decodeInspectedLock,
  decodeInspectedPermit,
  decodeKeyPage,
  withHeldMs,
} from "./postgres-codec.js";
import { advisoryKey, type TokenTag } from "./postgres-keys.js";
import type { LeaseStatements } from "./postgres-lease-statements.js";
import type { InspectionStatements } from "./statements.js";

/*
 * Inspection and forced release for operators, in both modes.
 *
 * Advisory mode: a lock is an advisory lock on a hash of its name, so the server's lock table
 * does not name it. Each session records the names of the locks it holds in `lock_names`
 * (by connection and key) with its next renewal, off the acquire's path: a list shows a lock
 * from its holder's first renewal after the grant on (within a third of the TTL), as long as
 * the server's lock table says that connection holds it. A session-level advisory lock
 * belongs to its connection: no other connection can unlock it. A forced release records a
 * revocation (`revocations`, by the holder's pid, with the token and the reason); the
 * holder's renewal reads it in the statement it runs anyway, unlocks that grant itself, and
 * reports it revoked. The next waiter is granted within one renewal interval (a third of the
 * TTL) of the forced release; a holder that no longer renews loses its connection, and every
 * lock, within one TTL anyway. A permit grant is a row: a forced release deletes it at once
 * with the permit functions' release (which grants and announces the waiters that now fit),
 * and records the revocation, with the permit key's name, for the connection holding the
 * session's liveness key.
 *
 * Row-lease mode: a forced release deletes the lease row (owner-checked by token, its session
 * alive) and records the revocation (`lease_revocations`, by session) in one statement; waiters
 * find the lease free at their next poll, and the holder's renewal reads the revocation in its
 * own statement.
 *
 * Revocations a renewal reported are deleted by the next one (its tokens go back to the
 * server), so one whose reply was lost is read again and none is reported twice.
 */

/** How inspection reaches the server: one statement, run by text (planned with its values). */
export interface InspectionCalls {
  readonly namespace: string;
  /** Runs `text` with `values`: its rows, or the error to throw. */
  readonly rows: (text: string, values: unknown[]) => Promise<Record<string, unknown>[]>;
  /** Whether the schema has the tables of inspection (see SchemaState in schema.ts). */
  readonly ready: () => boolean;
}

/**
 * The least string above every string that starts with `prefix` (by code point, as the
 * tables' "C" collation orders UTF-8), or `null` when there is none (an empty prefix, or one
 * that ends in the last code point).
 */
export function prefixEnd(prefix: string): string | null {
  const points = [...prefix];
  const last = points.pop();
  if (last === undefined) return null;
  let code = (last.codePointAt(0) as number) + 1;
  if (code >= 0xd800 && code <= 0xdfff) code = 0xe000;
  if (code > 0x10ffff) return null;
  return points.join("") + String.fromCodePoint(code);
}

/** The values of a list statement (see InspectionStatements in statements.ts). */
function listValues(namespace: string, options: ListKeysOptions): unknown[] {
  return [
    namespace,
    options.cursor ?? null,
    options.prefix,
    prefixEnd(options.prefix),
    options.limit,
  ];
}

function notMigrated(): ConfigError {
  return new ConfigError(
    "schema",
    "the tables of inspection and forced release are missing in Baton's schema; run migrate() once",
  );
}

/** Inspection and forced release of the advisory mode. */
export class AdvisoryInspection {
  readonly #calls: InspectionCalls;
  readonly #statements: InspectionStatements;
  readonly #tag: (key: bigint) => TokenTag;
  readonly #permitSession: () => string;

  /**
   * `tag`: the token-lock tag of a key; `permitSession`: the session's liveness key of its
   * permits (its own entries count as alive).
   */
  constructor(
    calls: InspectionCalls,
    statements: InspectionStatements,
    tag: (key: bigint) => TokenTag,
    permitSession: () => string,
  ) {
    this.#calls = calls;
    this.#statements = statements;
    this.#tag = tag;
    this.#permitSession = permitSession;
  }

  async listKeys(options: ListKeysOptions): Promise<KeyPage> {
    if (!this.#calls.ready()) throw notMigrated();
    const text =
      options.space === "lock"
        ? this.#statements.listLocks
        : options.space === "permit"
          ? this.#statements.listPermits
          : this.#statements.listRecords;
    const rows = await this.#calls.rows(text, listValues(this.#calls.namespace, options));
    return decodeKeyPage(rows, options.limit);
  }

  async inspectKey(space: "lock" | "permit", name: string): Promise<KeyState | null> {
    if (space === "permit") {
      const rows = await this.#calls.rows(this.#statements.inspectPermit, [
        this.#calls.namespace,
        name,
        this.#permitSession(),
      ]);
      return decodeInspectedPermit(rows);
    }
    const key = advisoryKey(this.#calls.namespace, name);
    const rows = await this.#calls.rows(this.#statements.inspectLock, [
      key.toString(),
      this.#tag(key),
    ]);
    return decodeInspectedLock(rows);
  }

  /**
   * Records the revocation for the holder's renewal (see the top of this file): `true` when
   * the grant with that token holds `name` right now.
   */
  async forceRelease(
    space: "lock" | "permit",
    name: string,
    options: ForceReleaseOptions,
  ): Promise<boolean> {
    if (!this.#calls.ready()) throw notMigrated();
    if (space === "permit") {
      const rows = await this.#calls.rows(this.#statements.forcePermit, [
        this.#calls.namespace,
        name,
        options.token.toString(),
        options.reason,
        this.#permitSession(),
      ]);
      return rows[0]?.released === true;
    }
    const key = advisoryKey(this.#calls.namespace, name);
    const rows = await this.#calls.rows(this.#statements.forceRelease, [
      key.toString(),
      this.#tag(key),
      options.token.toString(),
      options.reason,
    ]);
    return rows.length > 0;
  }
}

/** Inspection and forced release of the row-lease mode. */
export class LeaseInspection {
  readonly #calls: InspectionCalls;
  readonly #statements: LeaseStatements;
  readonly #records: string;

  /** `records`: the list statement of record keys (shared with the advisory mode). */
  constructor(calls: InspectionCalls, statements: LeaseStatements, records: string) {
    this.#calls = calls;
    this.#statements = statements;
    this.#records = records;
  }

  async listKeys(options: ListKeysOptions): Promise<KeyPage> {
    // The row-lease mode has no permit keys (no semaphores).
    if (options.space === "permit") return { keys: [] };
    if (!this.#calls.ready()) throw notMigrated();
    const text = options.space === "lock" ? this.#statements.listLocks : this.#records;
    const rows = await this.#calls.rows(text, listValues(this.#calls.namespace, options));
    return decodeKeyPage(rows, options.limit);
  }

  async inspectKey(space: "lock" | "permit", name: string): Promise<KeyState | null> {
    if (space === "permit") return null;
    // Waiters poll, unknown to the server: only the live holder.
    const rows = await this.#calls.rows(this.#statements.inspect, [this.#calls.namespace, name]);
    const holder = decodeHolder(rows);
    if (holder === null) return null;
    return { holders: [withHeldMs(holder, rows[0]?.held_ms)] };
  }

  /** Deletes the lease with that token (its session alive) and records the revocation. */
  async forceRelease(
    space: "lock" | "permit",
    name: string,
    options: ForceReleaseOptions,
  ): Promise<boolean> {
    if (space === "permit") return false;
    if (!this.#calls.ready()) throw notMigrated();
    const rows = await this.#calls.rows(this.#statements.forceRelease, [
      this.#calls.namespace,
      name,
      options.token.toString(),
      options.reason,
    ]);
    return Number(rows[0]?.released ?? 0) > 0;
  }
}
