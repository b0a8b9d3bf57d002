import {
  type InspectedHolder,
  type KeySpace,
  type KeyState,
  type PermitMode,
  READ_WRITE_LIMIT,
} from "../contract/backend.js";
import { ConfigError } from "../contract/errors.js";
import { checkInt, checkName, checkOptions, checkSignal } from "../helpers/validate.js";
import {
  checkForceRelease,
  type ForceReleaseRequest,
  type ForceReleaseResult,
  type InspectionAccess,
  type InspectionKind,
  noForceReleaseError,
  type RecipeHost,
} from "../kernel/index.js";
import { electionMarkerKey, electionOfMarker } from "./election-marker.js";
import { decodeJobRecord, type JobRecord } from "./job-record.js";

/** A holder as `coordinator.inspect()` and `list()` show it. */
export interface InspectionHolder {
  /** The holding coordinator's owner id (a foreign library's own data when `foreign` is set). */
  readonly ownerId: string;
  /** The value published with the grant (an election's leader address), if any. */
  readonly value?: string;
  /** The grant's fencing token; absent on a backend without fencing (`fencing: "none"`). */
  readonly token?: bigint;
  /** Milliseconds since the grant began, where the store tells. */
  readonly heldMs?: number;
  /** Milliseconds left on the holder's lease as the store sees it, where the store tells. */
  readonly remainingMs?: number;
  /** Semaphores and read-write locks: the permits this grant holds. */
  readonly permits?: number;
  /** Semaphores and read-write locks: `"permit"`, `"read"` or `"write"`. */
  readonly mode?: PermitMode;
  /** Set when another client library holds it on the same store entry (e.g. `"curator"`). */
  readonly foreign?: string;
}

/** Who waits, as far as the store knows. */
export interface InspectionWaiters {
  /** How many acquirers wait. */
  readonly count: number;
  /** Their owner ids in queue order, where the store keeps a queue. */
  readonly ownerIds?: readonly string[];
}

/** One slot of a job, with its durable record (see `coordinator.runOnce`). */
export interface InspectionSlot {
  /** The slot's name (`"2026-12-01"`, or a schedule's tick `2026-12-01T02:00:00Z`). */
  readonly slot: string;
  /** Where the slot stands: running, done or failed, the attempt, its holder and token. */
  readonly record: JobRecord;
}

/** What `coordinator.inspect()` and `list()` show of one name. */
export interface Inspection {
  /** What the name is; see {@link InspectionKind}. */
  readonly kind: InspectionKind;
  /** The lock, semaphore, read-write lock, election or job name. */
  readonly name: string;
  /**
   * Who holds it: the lock's or election's holder, the granted permits in grant order, or a
   * job's running slots' holders. Empty when nobody holds it but someone waits.
   */
  readonly holders: readonly InspectionHolder[];
  /** Who waits for it, when the store can tell. */
  readonly waiters?: InspectionWaiters;
  /** Semaphores and read-write locks: permits held and the limit. */
  readonly permits?: { readonly used: number; readonly limit: number };
  /**
   * Jobs: their latest slots (by slot name, greatest first: for dated slots and a schedule's
   * ticks, newest first), at most {@link INSPECTION_SLOTS} of them.
   */
  readonly slots?: readonly InspectionSlot[];
}

/** Options of `coordinator.inspect()`. */
export interface InspectOptions {
  /** Cancels the reads (rejects with its reason). */
  readonly signal?: AbortSignal;
}

/** Options of `coordinator.list()`. */
export interface ListOptions {
  /** Only names that start with this. Default: every name. */
  readonly prefix?: string;
  /**
   * At most this many items (1 to 100000). Default 1000. The store is read a page of keys at
   * a time, so stopping early (a `break`) costs no more than the pages read so far.
   */
  readonly limit?: number;
  /** Cancels the listing: the iteration rejects with its reason. */
  readonly signal?: AbortSignal;
}

/** The slots a job's inspection shows. */
export const INSPECTION_SLOTS = 5;
/** Items `list()` yields by default. */
export const DEFAULT_LIST_LIMIT = 1_000;
/** The most items one `list()` may ask for. */
const MAX_LIST_LIMIT = 100_000;
/** Keys asked of the store per page. */
const PAGE_SIZE = 100;
/** Keys read at once (their holders, records), per page. */
const READ_CONCURRENCY = 8;
/**
 * Record keys one `list()` or `inspect()` of a job reads at most (slot records of busy
 * schedules pile up: one per tick): the jobs and slots shown are those among them.
 */
export const RECORD_SCAN_LIMIT = 10_000;
/** How a slot's lock and record key joins its job and slot (see `runOnce`'s `slotKey`). */
const SLOT_SEPARATOR = "/slot/";

const INSPECT_KEYS = ["signal"] as const;
const LIST_KEYS = ["prefix", "limit", "signal"] as const;

/**
 * What the store holds for `name` (see `Coordinator.inspect`): a lock or an election, else a
 * semaphore or read-write lock, else a job with slot records; `null` when none of them.
 */
export async function inspect(
  host: RecipeHost,
  name: string,
  options?: InspectOptions,
): Promise<Inspection | null> {
  checkName(name);
  const o = checkOptions(options, "options", INSPECT_KEYS);
  const signal = o.signal === undefined ? undefined : checkSignal(o.signal);
  const access = await host.inspection(signal);
  const [lock, marker, permits] = await Promise.all([
    access.inspectKey("lock", name),
    access.readRecord(electionMarkerKey(name)),
    access.inspectKey("permit", name),
  ]);
  if (lock !== null) return fromLock(access, name, lock, marker !== null);
  if (permits !== null) return fromPermits(access, name, permits);
  return await inspectJob(access, name, await slotNames(access, name, signal));
}

/**
 * Every lock, election, semaphore, read-write lock and job under `prefix` (see
 * `Coordinator.list`). Checks its options at once, before any I/O.
 */
export function list(host: RecipeHost, options?: ListOptions): AsyncIterable<Inspection> {
  const o = checkOptions(options, "options", LIST_KEYS);
  // A prefix is a piece of a name: no control characters.
  const prefix = o.prefix === undefined || o.prefix === "" ? "" : checkName(o.prefix, "prefix");
  const limit =
    o.limit === undefined ? DEFAULT_LIST_LIMIT : checkInt(o.limit, "limit", 1, MAX_LIST_LIMIT);
  const signal = o.signal === undefined ? undefined : checkSignal(o.signal);
  return listAll(host, prefix, limit, signal);
}

async function* listAll(
  host: RecipeHost,
  prefix: string,
  limit: number,
  signal: AbortSignal | undefined,
): AsyncGenerator<Inspection> {
  const access = await host.inspection(signal);
  let left = limit;
  /** Jobs (their names) whose slot locks are held, with those locks' names. */
  const runningSlots = new Map<string, string[]>();
  // Plain locks and elections; a slot's lock is folded into its job, shown last.
  for await (const keys of pages(access, "lock", prefix, signal)) {
    const plain: string[] = [];
    for (const key of keys) {
      const job = jobOfSlotKey(key);
      if (job === undefined || !job.startsWith(prefix)) plain.push(key);
      else runningSlots.set(job, [...(runningSlots.get(job) ?? []), key]);
    }
    const items = await mapLimited(plain, async (key) => {
      const [state, marker] = await Promise.all([
        access.inspectKey("lock", key),
        access.readRecord(electionMarkerKey(key)),
      ]);
      return state === null ? null : fromLock(access, key, state, marker !== null);
    });
    for (const item of items) {
      if (item === null) continue;
      signal?.throwIfAborted();
      yield item;
      if (--left === 0) return;
    }
  }
  // Semaphores and read-write locks.
  for await (const keys of pages(access, "permit", prefix, signal)) {
    const items = await mapLimited(keys, async (key) => {
      const state = await access.inspectKey("permit", key);
      return state === null ? null : fromPermits(access, key, state);
    });
    for (const item of items) {
      if (item === null) continue;
      signal?.throwIfAborted();
      yield item;
      if (--left === 0) return;
    }
  }
  // Jobs: those with slot records (among the first RECORD_SCAN_LIMIT record keys) and those
  // whose slot locks are held, each with its latest slots.
  const jobs = new Map<string, string[]>();
  for (const job of runningSlots.keys()) jobs.set(job, []);
  if (access.records) {
    let scanned = 0;
    for await (const keys of pages(access, "record", prefix, signal)) {
      for (const key of keys) {
        if (electionOfMarker(key) !== undefined) continue;
        const job = jobOfSlotKey(key);
        if (job === undefined || !job.startsWith(prefix)) continue;
        let slots = jobs.get(job);
        if (slots === undefined) {
          if (jobs.size >= left) continue;
          slots = [];
          jobs.set(job, slots);
        }
        keepLatest(slots, key.slice(job.length + SLOT_SEPARATOR.length));
      }
      scanned += keys.length;
      if (scanned >= RECORD_SCAN_LIMIT) break;
    }
  }
  for (const job of [...jobs.keys()].sort(byCodeUnit)) {
    const item = await inspectJob(access, job, jobs.get(job) ?? [], runningSlots.get(job));
    if (item === null) continue;
    signal?.throwIfAborted();
    yield item;
    if (--left === 0) return;
  }
}

/**
 * Frees a grant of `name` at the store (see `Coordinator.forceRelease`); a job's (`kind:
 * "job"`) is the lock of its running slot, found by listing the job's slot locks (so it
 * needs a backend with inspection): the one whose token is `token`, or the only one.
 */
export async function forceRelease(
  host: RecipeHost,
  name: string,
  request: ForceReleaseRequest,
): Promise<ForceReleaseResult> {
  const checked = checkForceRelease(name, request);
  if (checked.kind !== "job") return await host.forceRelease(name, request);
  const access = await host.inspection(checked.signal);
  const scope = access.forceRelease;
  if (scope === undefined) throw noForceReleaseError(access.kind);
  const running: { key: string; token: bigint }[] = [];
  for await (const keys of pages(access, "lock", `${name}${SLOT_SEPARATOR}`, checked.signal)) {
    const states = await mapLimited(keys, (key) => access.inspectKey("lock", key));
    keys.forEach((key, at) => {
      for (const h of states[at]?.holders ?? []) running.push({ key, token: h.token });
    });
  }
  const token = checked.token;
  const slot = token === undefined ? running : running.filter((r) => r.token === token);
  if (slot.length > 1) {
    throw new ConfigError(
      "token",
      `job "${name}" has ${slot.length} running slots (${slot.map((r) => `${r.key}: token ${r.token}`).join(", ")}): pass the token of the one to free`,
    );
  }
  const found = slot[0];
  if (found === undefined) {
    return {
      name,
      released: false,
      space: "lock",
      scope,
      ...(token === undefined ? {} : { token }),
    };
  }
  return await host.forceRelease(found.key, { ...request, kind: "lock", token: found.token });
}

/** The pages of keys of `space` under `prefix`, until the store's cursor ends. */
async function* pages(
  access: InspectionAccess,
  space: KeySpace,
  prefix: string,
  signal: AbortSignal | undefined,
): AsyncGenerator<readonly string[]> {
  let cursor: string | undefined;
  do {
    signal?.throwIfAborted();
    const page = await access.listKeys(space, prefix, cursor, PAGE_SIZE);
    if (page.keys.length > 0) yield page.keys;
    cursor = page.cursor;
  } while (cursor !== undefined);
}

/** The job a slot's lock or record key belongs to, or `undefined` for any other key. */
function jobOfSlotKey(key: string): string | undefined {
  const at = key.lastIndexOf(SLOT_SEPARATOR);
  if (at <= 0 || at + SLOT_SEPARATOR.length >= key.length) return undefined;
  return key.slice(0, at);
}

/** Keeps `slot` in `slots` if it is among the {@link INSPECTION_SLOTS} greatest names. */
function keepLatest(slots: string[], slot: string): void {
  if (slots.length === INSPECTION_SLOTS && slot <= (slots[slots.length - 1] as string)) return;
  slots.push(slot);
  slots.sort((a, b) => byCodeUnit(b, a));
  if (slots.length > INSPECTION_SLOTS) slots.pop();
}

/** The latest slot names of `job` among the first {@link RECORD_SCAN_LIMIT} record keys. */
async function slotNames(
  access: InspectionAccess,
  job: string,
  signal: AbortSignal | undefined,
): Promise<string[]> {
  const slots: string[] = [];
  if (!access.records) return slots;
  const prefix = `${job}${SLOT_SEPARATOR}`;
  let scanned = 0;
  for await (const keys of pages(access, "record", prefix, signal)) {
    for (const key of keys) keepLatest(slots, key.slice(prefix.length));
    scanned += keys.length;
    if (scanned >= RECORD_SCAN_LIMIT) break;
  }
  return slots;
}

/**
 * A job: its latest slots' records, and the holders of its running slots (those of
 * `runningKeys`, or of the shown slots whose record says running); `null` when it has no
 * slot record and no running slot.
 */
async function inspectJob(
  access: InspectionAccess,
  job: string,
  slotNamesShown: readonly string[],
  runningKeys?: readonly string[],
): Promise<Inspection | null> {
  const records = await mapLimited(slotNamesShown, async (slot) => {
    const stored = await access.readRecord(`${job}${SLOT_SEPARATOR}${slot}`);
    const record = stored === null ? undefined : decodeJobRecord(stored.value);
    return record === undefined ? null : { slot, record };
  });
  const slots = records.filter((r): r is InspectionSlot => r !== null);
  const running =
    runningKeys ??
    slots
      .filter((s) => s.record.state === "running")
      .map((s) => `${job}${SLOT_SEPARATOR}${s.slot}`);
  const states = await mapLimited(running, (key) => access.inspectKey("lock", key));
  const holders = states.flatMap((state) => (state?.holders ?? []).map((h) => holderOf(access, h)));
  if (slots.length === 0 && holders.length === 0) return null;
  return { kind: "job", name: job, holders, slots };
}

function fromLock(
  access: InspectionAccess,
  name: string,
  state: KeyState,
  election: boolean,
): Inspection {
  return {
    kind: election ? "election" : "lock",
    name,
    holders: state.holders.map((h) => holderOf(access, h)),
    ...(state.waiters === undefined ? {} : { waiters: state.waiters }),
  };
}

function fromPermits(access: InspectionAccess, name: string, state: KeyState): Inspection {
  const limit = state.limit;
  const used = state.holders.reduce((sum, h) => sum + (h.permits ?? 0), 0);
  return {
    kind: limit === READ_WRITE_LIMIT ? "read-write-lock" : "semaphore",
    name,
    holders: state.holders.map((h) => holderOf(access, h)),
    ...(state.waiters === undefined ? {} : { waiters: state.waiters }),
    ...(limit === undefined ? {} : { permits: { used, limit } }),
  };
}

/** A store's holder as shown: without a token on a backend whose tokens mean nothing. */
function holderOf(access: InspectionAccess, h: InspectedHolder): InspectionHolder {
  const out: { -readonly [K in keyof InspectionHolder]: InspectionHolder[K] } = {
    ownerId: h.ownerId,
  };
  if (h.value !== undefined) out.value = h.value;
  if (access.fencing !== "none") out.token = h.token;
  if (h.heldMs !== undefined) out.heldMs = h.heldMs;
  if (h.remainingMs !== undefined) out.remainingMs = h.remainingMs;
  if (h.permits !== undefined) out.permits = h.permits;
  if (h.mode !== undefined) out.mode = h.mode;
  if (h.foreign !== undefined) out.foreign = h.foreign;
  return out;
}

/** `read` of every item, at most {@link READ_CONCURRENCY} at once; results in item order. */
async function mapLimited<T, R>(items: readonly T[], read: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const at = next++;
      results[at] = await read(items[at] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(READ_CONCURRENCY, items.length) }, worker));
  return results;
}

function byCodeUnit(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
