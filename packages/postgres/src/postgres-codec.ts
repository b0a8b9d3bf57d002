import type {
  Holder,
  InspectedHolder,
  KeyPage,
  KeyState,
  PermitHolder,
  PermitMode,
  StoredRecord,
} from "@baton/core";

/*
 * What Baton's statements send and return, beside the SQL text (statements.ts): the values
 * given to them and the columns read back, each written next to the code that reads it. pg
 * returns `bigint` columns as decimal strings and takes bigint parameters as decimal strings;
 * `int` as numbers, `boolean` as booleans. The acquires and releases are run as a
 * PreparedCall (prepared-call.ts), which reads their one column as the server's text: a token
 * as a decimal, a boolean as `t` or `f`, NULL (or no row) as `null`.
 */

// --- The token column of an acquire ------------------------------------------------------

/**
 * The first character of an acquire's `token` column when the token lock was not taken (the
 * holder row must then be recorded): `r`, followed by the token.
 */
export const RECORD_MARK = "r";

/** {@link RECORD_MARK} as a UTF-16 code unit, to test the column's first character. */
const RECORD_MARK_CODE = RECORD_MARK.charCodeAt(0);

/**
 * Token offsets from the token sequence's start that fit in a token lock (an int4): a token
 * this far from the start and beyond is recorded in a holder row instead.
 */
export const TOKEN_LOCK_LIMIT = 1n << 31n;

/**
 * The start value of the token sequence `sequence` (quoted for a string literal), in SQL: a
 * token lock holds a token as its offset from it, since the sequence starts at the server's
 * clock in microseconds (see schema.ts). A system-cache lookup, no catalog scan.
 */
export function tokenBaseSql(sequence: string): string {
  // Hot path: see docs/hot-path.md, "PostgreSQL".
  return `(pg_sequence_parameters('${sequence}'::regclass)).start_value`;
}

/** Encodes: the token lock's second integer for `token` (SQL bigints), as an int4. */
export function tokenOffsetSql(token: string, base: string): string {
  return `(${token} - ${base})::int`;
}

/** Decodes: the token a token lock's second integer (`objid` in `pg_locks`) stands for. */
export function tokenFromOffsetSql(objid: string, base: string): string {
  return `${objid}::bigint + ${base}`;
}

/**
 * Encodes the one column of a token-kept acquire, `token` (text), from `t.token`, `t.base`
 * (the sequence's {@link tokenBaseSql}) and tag `tag` (an SQL parameter): NULL when the lock
 * was not granted; the token when its token lock (`tag`, token - base) was taken too;
 * {@link RECORD_MARK} and the token when it was not (someone holds that pair exclusively, or
 * the offset is not below {@link TOKEN_LOCK_LIMIT}), so the holder row must be recorded. CASE
 * evaluates its branches in order: the token lock is tried only for an offset that fits.
 * Decoded by {@link recordNeeded}, {@link grantedToken} and {@link tokenToRecord}.
 */
export function keptTokenColumn(tag: string): string {
  // Hot path: see docs/hot-path.md, "PostgreSQL".
  return `CASE WHEN t.token IS NULL THEN NULL
  WHEN t.token - t.base NOT BETWEEN 0 AND ${TOKEN_LOCK_LIMIT - 1n} THEN '${RECORD_MARK}' || t.token
  WHEN pg_try_advisory_lock_shared(${tag}::int, ${tokenOffsetSql("t.token", "t.base")}) THEN t.token::text
  ELSE '${RECORD_MARK}' || t.token END AS token`;
}

/**
 * Whether a token-kept acquire's granted `column` says the token lock was not taken
 * ({@link RECORD_MARK}): the holder row must be recorded, with {@link tokenToRecord}.
 */
export function recordNeeded(column: string): boolean {
  return column.charCodeAt(0) === RECORD_MARK_CODE;
}

/** The token of a granted acquire's `column` that needs no record (see {@link recordNeeded}). */
export function grantedToken(column: string): bigint {
  return BigInt(column);
}

/** The token of a granted `column` for which {@link recordNeeded} is true. */
export function tokenToRecord(column: string): bigint {
  return BigInt(column.slice(RECORD_MARK.length));
}

// --- Other results ---------------------------------------------------------------------

/** The `pid` (int) of the first row: the session's or waiter's server process. */
export function decodePid(rows: readonly Record<string, unknown>[]): number {
  return (rows[0] as { pid: number }).pid;
}

/**
 * The `unlocked` column (boolean) of a release, as the server's text (see prepared-call.ts):
 * whether the key was held.
 */
export function decodeUnlocked(column: string | null): boolean {
  return column === "t";
}

/** The `key` (bigint as text) of a row of the renewal: a key this connection no longer holds. */
export function decodeLostKey(row: Record<string, unknown>): bigint {
  return BigInt(row.key as string);
}

/**
 * The holder in the first row of the `holder` statement: `owner` (text), `token` (bigint, as
 * a decimal string), `value` (text, NULL without a value) and, when the statement tells it,
 * `remaining_ms` (float8: the time left on the holder's lease, by the server's clock; NULL or
 * absent when the server cannot tell); `null` without a row.
 */
export function decodeHolder(rows: readonly Record<string, unknown>[]): Holder | null {
  const row = rows[0];
  if (row === undefined) return null;
  const remaining = row.remaining_ms;
  const holder: Holder = {
    ownerId: row.owner as string,
    token: BigInt(row.token as string),
    ...(row.value === null || row.value === undefined ? {} : { value: row.value as string }),
    ...(typeof remaining === "number" ? { remainingMs: Math.max(0, remaining) } : {}),
  };
  return holder;
}

// --- Durable records -------------------------------------------------------------------

/**
 * A record write's new version, as SQL: the server's clock in microseconds
 * (`clock_timestamp()`), as the token sequence starts; an update takes the greater of it and
 * the expected version plus one, so versions rise with every write. A record created again
 * after it was lost (a deleted row, a truncated table, a restored backup) starts above every
 * version it had, as long as the server's clock did not go back: a write expecting a version
 * from before the loss never matches the record written since.
 */
export const RECORD_CLOCK = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint";

/** The largest `bigint`: no record has a version above it. */
const MAX_RECORD_VERSION = (1n << 63n) - 1n;

/** How a version this adapter hands out is spelt: a positive decimal, no leading zero. */
const RECORD_VERSION = /^[1-9][0-9]{0,18}$/;

/**
 * Encodes the version a write expects as the update's `bigint` parameter (a decimal string),
 * or `undefined` for a string that is no version of a record ("0", "01", "-1", "x", past a
 * bigint): no row has it, so the write writes nothing, without a round trip.
 */
export function encodeExpectedVersion(expected: string): string | undefined {
  if (!RECORD_VERSION.test(expected) || BigInt(expected) > MAX_RECORD_VERSION) return undefined;
  return expected;
}

/**
 * Decodes the record read's first row: `value` (text) and `version` (bigint, sent as text by
 * the statement, so a `pg` type parser set for bigint elsewhere in the process cannot turn it
 * into a number); `null` without a row.
 */
export function decodeRecord(rows: readonly Record<string, unknown>[]): StoredRecord | null {
  const row = rows[0];
  if (row === undefined) return null;
  return { value: row.value as string, version: row.version as string };
}

/**
 * Decodes a record write's `RETURNING version` (text): the new version, or `null` without a
 * row (the version did not match, or a record existed: nothing was written).
 */
export function decodeWrittenVersion(rows: readonly Record<string, unknown>[]): string | null {
  return (rows[0]?.version as string | undefined) ?? null;
}

// --- Values ----------------------------------------------------------------------------

/** A key to unlock; `tokenKept`: its token lock (tag `use.tag`) may be held too. */
export interface KeyToUnlock {
  readonly key: bigint;
  readonly tokenKept: boolean;
  readonly use: { readonly tag: number };
}

/**
 * The values of the `unlockHeld` statement for `keys`: the keys (bigint[]) and the tags of
 * those whose token lock may be held (bigint[]), as decimal strings.
 */
export function unlockHeldValues(keys: readonly KeyToUnlock[]): [string[], string[]] {
  const tags: string[] = [];
  for (const k of keys) if (k.tokenKept) tags.push(String(k.use.tag));
  return [keys.map((k) => k.key.toString()), tags];
}

/** A grant whose holder row is to be deleted: its key and token. */
export interface HolderRow {
  readonly key: bigint;
  readonly token: bigint;
}

/** Two bigint[] values, as decimal strings: the keys and the tokens of `rows`. */
export function holderRowValues(rows: readonly HolderRow[]): [string[], string[]] {
  return [rows.map((r) => r.key.toString()), rows.map((r) => r.token.toString())];
}

// --- Row leases (locks: "lease") --------------------------------------------------------

/** The row-lease `acquire` statement's row: the new token, or `null` when held; `live`. */
export function decodeLeaseGrant(rows: readonly Record<string, unknown>[]): {
  readonly token: bigint | null;
  readonly live: boolean;
} {
  const row = rows[0];
  const token = row?.token;
  return { token: typeof token === "string" ? BigInt(token) : null, live: row?.live === true };
}

/**
 * The row-lease `reap` statement's row: how many expired sessions it deleted, the live
 * holder's time left in ms (`null` when the lock is free), and the token of the lease it read
 * (text; `null` when there was none), by which a waiter sees the name change hands.
 */
export function decodeReap(rows: readonly Record<string, unknown>[]): {
  readonly reaped: number;
  readonly remainingMs: number | null;
  readonly holderToken: string | null;
} {
  const row = rows[0];
  const remaining = row?.remaining_ms;
  const token = row?.token;
  return {
    reaped: Number(row?.reaped ?? 0),
    remainingMs: typeof remaining === "number" ? Math.max(0, remaining) : null,
    holderToken: typeof token === "string" ? token : null,
  };
}

// --- Permits (semaphores, read-write locks) ---------------------------------------------

/** What the permit acquire's one column says (see permit-functions.ts). */
export type PermitAcquireOutcome =
  | { readonly kind: "granted"; readonly id: bigint; readonly token: bigint }
  | { readonly kind: "waiting"; readonly id: bigint }
  | { readonly kind: "refused" }
  | { readonly kind: "limit"; readonly stored: number }
  | { readonly kind: "session-key-taken" };

/**
 * Decodes the permit acquire's column: `g<id> <token>`, `w<id>`, `n`, `l<limit>` or `s` (see
 * {@link PermitAcquireOutcome}).
 */
export function decodePermitAcquire(column: string | null): PermitAcquireOutcome {
  const body = column?.slice(1) ?? "";
  switch (column?.charAt(0)) {
    case "g": {
      const space = body.indexOf(" ");
      return {
        kind: "granted",
        id: BigInt(body.slice(0, space)),
        token: BigInt(body.slice(space + 1)),
      };
    }
    case "w":
      return { kind: "waiting", id: BigInt(body) };
    case "n":
      return { kind: "refused" };
    case "l":
      return { kind: "limit", stored: Number(body) };
    case "s":
      return { kind: "session-key-taken" };
  }
  throw new Error(`unexpected answer of the permit acquire: ${String(column)}`);
}

/**
 * Decodes a waiter's check (`g<token>`, `w`, `x`): the token once granted, `"waiting"`, or
 * `"gone"` (the entry is no longer there).
 */
export function decodePermitCheck(column: string | null): bigint | "waiting" | "gone" {
  if (column?.charAt(0) === "g") return BigInt(column.slice(1));
  if (column === "w") return "waiting";
  return "gone";
}

/** Decodes the permit downgrade's column: the token, or `null` (not a write grant held). */
export function decodePermitDowngrade(column: string | null): bigint | null {
  return column === null ? null : BigInt(column);
}

/**
 * Decodes the rows of the permit holders statement: `owner`, `token` (text), `value`,
 * `permits` (int), `mode` (text).
 */
export function decodePermitHolders(rows: readonly Record<string, unknown>[]): PermitHolder[] {
  return rows.map((row) => {
    const holder = {
      ownerId: row.owner as string,
      token: BigInt(row.token as string),
      permits: row.permits as number,
      mode: row.mode as PermitMode,
    };
    return row.value === null ? holder : { ...holder, value: row.value as string };
  });
}

/**
 * Decodes a grant announcement's payload (`<first> <last>`): the ids it granted are among
 * those from `first` to `last`; `null` for a payload of another shape.
 */
export function decodePermitNotice(payload: string | undefined): readonly [bigint, bigint] | null {
  const match = /^(-?[0-9]+) (-?[0-9]+)$/.exec(payload ?? "");
  if (match === null) return null;
  return [BigInt(match[1] as string), BigInt(match[2] as string)];
}

// --- Inspection and forced release (postgres-inspection.ts) ------------------------------

/**
 * A page of a list statement's rows (`name`, text, in order) asked for with `limit`: a full
 * page's last key is the cursor of the next (there may be more), a shorter page ends the list.
 */
export function decodeKeyPage(rows: readonly Record<string, unknown>[], limit: number): KeyPage {
  const keys = rows.map((row) => row.name as string);
  const last = keys[keys.length - 1];
  return keys.length === limit && last !== undefined ? { keys, cursor: last } : { keys };
}

/** A row of the advisory renewal with inspection (`key`, `token`, `reason`, `name`, all text). */
export type RenewalRow =
  /** This connection no longer holds `key`. */
  | { readonly key: bigint; readonly revoked?: undefined }
  /** The grant of `key` with token `revoked.token` was force-released. */
  | {
      readonly key: bigint;
      readonly revoked: {
        readonly token: bigint;
        readonly reason: string;
        /** A permit grant's: the permit key's name (absent: a lock's). */
        readonly permit?: string;
      };
    };

/** Decodes a row of the advisory renewal (see {@link RenewalRow}). */
export function decodeRenewalRow(row: Record<string, unknown>): RenewalRow {
  const key = BigInt(row.key as string);
  if (row.token === null || row.token === undefined) return { key };
  const revoked = { token: BigInt(row.token as string), reason: row.reason as string };
  return typeof row.name === "string"
    ? { key, revoked: { ...revoked, permit: row.name } }
    : { key, revoked };
}

/** A revocation the row-lease renewal read: the lease's name, its token and the reason. */
export interface LeaseRevocation {
  readonly name: string;
  readonly token: bigint;
  readonly reason: string;
}

/**
 * Decodes the row-lease renewal's `revoked` column: a JSON array of `[name, token, reason]`
 * (pg parses it), or NULL when there is none.
 */
export function decodeLeaseRevocations(column: unknown): LeaseRevocation[] {
  if (!Array.isArray(column)) return [];
  return column.map((entry) => {
    const [name, token, reason] = entry as [string, string, string];
    return { name, token: BigInt(token), reason };
  });
}

/**
 * Decodes the advisory `inspectLock` row: the holder as {@link decodeHolder} reads it (no
 * `owner` when nobody holds the key), `waiting` (int) and `waiters` (text[] or NULL: the owners
 * of the Baton sessions among them). Owner ids are given only when every waiting connection is
 * a session's (a waiter connection waits for several acquirers at once); `null` when the key
 * has neither a holder nor a waiter.
 */
export function decodeInspectedLock(rows: readonly Record<string, unknown>[]): KeyState | null {
  const row = rows[0];
  if (row === undefined) return null;
  const holder = row.owner === null || row.owner === undefined ? null : decodeHolder(rows);
  const count = Number(row.waiting ?? 0);
  if (holder === null && count === 0) return null;
  const owners = Array.isArray(row.waiters) ? (row.waiters as string[]) : [];
  return {
    holders: holder === null ? [] : [holder],
    ...(count > 0
      ? { waiters: owners.length === count ? { count, ownerIds: owners } : { count } }
      : {}),
  };
}

/**
 * Decodes the advisory `inspectPermit` rows (entries of live sessions in queue order: `owner`,
 * `token`, `value`, `permits`, `mode`, `granted`, `limit`): the granted ones as holders, the
 * others as waiters in order; `null` when there is none.
 */
export function decodeInspectedPermit(rows: readonly Record<string, unknown>[]): KeyState | null {
  if (rows.length === 0) return null;
  const holders: InspectedHolder[] = [];
  const waiting: string[] = [];
  for (const row of rows) {
    if (row.granted !== true) {
      waiting.push(row.owner as string);
      continue;
    }
    holders.push({
      ownerId: row.owner as string,
      token: BigInt(row.token as string),
      permits: row.permits as number,
      mode: row.mode as PermitMode,
      ...(row.value === null ? {} : { value: row.value as string }),
    });
  }
  return {
    holders,
    ...(waiting.length > 0 ? { waiters: { count: waiting.length, ownerIds: waiting } } : {}),
    limit: (rows[0] as { limit: number }).limit,
  };
}

/**
 * `holder` with `heldMs` from a `held_ms` column (float8: milliseconds since the grant, by the
 * server's clock), when the column has a value.
 */
export function withHeldMs(holder: Holder, heldMs: unknown): InspectedHolder {
  return typeof heldMs === "number" ? { ...holder, heldMs: Math.max(0, heldMs) } : holder;
}
