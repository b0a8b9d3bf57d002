/**
 * Where one scheduled job's slot stands, as stored durably beside its lock. Written only by
 * compare-and-set, so two replicas never both record a slot.
 */
export interface JobRecord {
  /**
   * - `running`: attempt `attempt` started under `token` (a record left `running` by a holder
   *   whose lock has ended is a crashed attempt);
   * - `done`: attempt `attempt` finished; the slot never runs again;
   * - `failed`: attempt `attempt` failed with `error`; retried while attempts remain.
   */
  readonly state: "running" | "done" | "failed";
  /** Attempts started so far, the current one included (from 1). */
  readonly attempt: number;
  /** The fencing token of the lock the attempt ran under. */
  readonly token: bigint;
  /** Owner id of the coordinator that ran the attempt. */
  readonly holder: string;
  /** Wall-clock time (ms since the epoch) the attempt started, as its holder saw it. */
  readonly startedAt: number;
  /** Wall-clock time the attempt ended (`done` and `failed`). */
  readonly endedAt?: number;
  /** The failure's message (`failed`). */
  readonly error?: string;
}

/**
 * What `JSON.stringify` writes for a {@link JobRecord} that Baton gave out (in a
 * `RunOnceResult`): the same fields, the token in decimal (`BigInt(json.token)` reads it back).
 */
export interface JobRecordJson {
  readonly state: JobRecord["state"];
  readonly attempt: number;
  readonly token: string;
  readonly holder: string;
  readonly startedAt: number;
  readonly endedAt?: number;
  readonly error?: string;
}

/**
 * `record` with a `toJSON` (not enumerable: spreads, keys and equality see only the fields)
 * that writes its {@link JobRecordJson}, so `JSON.stringify` of a record works despite its
 * bigint token.
 *
 * @internal
 */
export function withRecordJson(record: JobRecord): JobRecord {
  return withJson(record, () => jobRecordJson(record));
}

/** The JSON form of `record`. @internal */
export function jobRecordJson(record: JobRecord): JobRecordJson {
  return { ...record, token: record.token.toString() };
}

/**
 * Gives `value` a `toJSON` that is not enumerable (invisible to spreads, `Object.keys` and
 * deep equality) and returns it.
 *
 * @internal
 */
export function withJson<T extends object>(value: T, toJSON: () => unknown): T {
  Object.defineProperty(value, "toJSON", { value: toJSON, enumerable: false, configurable: true });
  return value;
}

/** Format version written with every record, so a later format can tell old records apart. */
const RECORD_FORMAT = 1;

/** Encodes a record for a backend's `writeRecord` (JSON; the token as a decimal string). */
export function encodeJobRecord(record: JobRecord): string {
  return JSON.stringify({ v: RECORD_FORMAT, ...record, token: record.token.toString() });
}

/**
 * Decodes a stored record; `undefined` for a value that is not a job record (a record key
 * written by something else), which the caller reports instead of overwriting.
 */
export function decodeJobRecord(value: string): JobRecord | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(value);
  } catch {
    return undefined;
  }
  if (typeof raw !== "object" || raw === null) return undefined;
  const r = raw as Record<string, unknown>;
  if (r.v !== RECORD_FORMAT) return undefined;
  if (r.state !== "running" && r.state !== "done" && r.state !== "failed") return undefined;
  if (!Number.isSafeInteger(r.attempt) || typeof r.token !== "string" || !/^\d+$/.test(r.token)) {
    return undefined;
  }
  if (typeof r.holder !== "string" || typeof r.startedAt !== "number") return undefined;
  return withRecordJson({
    state: r.state,
    attempt: r.attempt as number,
    token: BigInt(r.token),
    holder: r.holder,
    startedAt: r.startedAt,
    ...(typeof r.endedAt === "number" ? { endedAt: r.endedAt } : {}),
    ...(typeof r.error === "string" ? { error: r.error } : {}),
  });
}
