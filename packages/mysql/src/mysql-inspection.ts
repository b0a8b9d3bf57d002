import type { ForceReleaseOptions, KeyPage, KeyState, ListKeysOptions } from "@baton/core";
import {
  decodeForceRelease,
  decodeInspectedHolder,
  decodeKeyPage,
  lastRows,
} from "./mysql-codec.js";
import {
  type LeaseStatements,
  listValues,
  type RecordStatements,
} from "./mysql-lease-statements.js";

/*
 * Inspection and forced release for operators, in the row-lease mode.
 *
 * A lock is a row of the leases table whose session row lives: a list reads the names of such
 * rows, in byte order (the names are VARBINARY, so by code point), a page at a time; an
 * inspection reads the holder with its time left and how long it has held, both on the
 * server's clock. Waiters poll, unknown to the server: none are reported.
 *
 * A forced release deletes the lease with that token (its session alive) and records the
 * revocation (session, token, name, reason) in one transaction: waiters find the name free at
 * their next poll, and the holder's renewal reads the revocation in the round trip it makes
 * anyway and reports the grant revoked. Revocations a renewal reported are deleted by the next
 * one (their tokens go back to the server), so one whose reply was lost is read again and none
 * is reported twice.
 */

/** How inspection reaches the server: one round trip, its result or the error to throw. */
export interface InspectionCalls {
  readonly namespace: string;
  readonly run: (sql: string, values: unknown[]) => Promise<unknown>;
}

/**
 * The least string above every string that starts with `prefix` (by code point, as the
 * VARBINARY columns order UTF-8), or `null` when there is none (an empty prefix, or one that
 * ends in the last code point).
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

/** Inspection and forced release of the row-lease mode. */
export class LeaseInspection {
  readonly #calls: InspectionCalls;
  readonly #statements: LeaseStatements;
  readonly #records: RecordStatements;

  constructor(calls: InspectionCalls, statements: LeaseStatements, records: RecordStatements) {
    this.#calls = calls;
    this.#statements = statements;
    this.#records = records;
  }

  async listKeys(options: ListKeysOptions): Promise<KeyPage> {
    // The row-lease mode has no permit keys (no semaphores).
    if (options.space === "permit") return { keys: [] };
    const sql = options.space === "lock" ? this.#statements.listLocks : this.#records.list;
    const values = listValues(
      this.#calls.namespace,
      options.cursor,
      options.prefix,
      prefixEnd(options.prefix),
      options.limit,
    );
    return decodeKeyPage(lastRows(await this.#calls.run(sql, values)), options.limit);
  }

  async inspectKey(space: "lock" | "permit", name: string): Promise<KeyState | null> {
    if (space === "permit") return null;
    const reply = await this.#calls.run(this.#statements.holder, [this.#calls.namespace, name]);
    const holder = decodeInspectedHolder(lastRows(reply));
    return holder === null ? null : { holders: [holder] };
  }

  /** Deletes the lease with that token (its session alive) and records the revocation. */
  async forceRelease(
    space: "lock" | "permit",
    name: string,
    options: ForceReleaseOptions,
  ): Promise<boolean> {
    if (space === "permit") return false;
    const { namespace } = this.#calls;
    const reply = await this.#calls.run(this.#statements.forceRelease, [
      options.reason,
      namespace,
      name,
      options.token,
      namespace,
      name,
      options.token,
    ]);
    return decodeForceRelease(reply);
  }
}
