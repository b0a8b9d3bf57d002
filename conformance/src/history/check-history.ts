import { type CertainHold, certainHolds } from "./certain-holds.js";
import {
  type AcquireOp,
  formatTime,
  History,
  type HistoryEntry,
  type PermitShare,
  type ReadOp,
  shareText,
  type WriteOp,
} from "./history.js";

/** The invariant a {@link Violation} breaks. */
export type ViolationKind =
  /** Two certain holds of one key overlap. */
  | "overlap"
  /**
   * Certain permit holds of one key take more than its limit at once: more permits than a
   * semaphore has, two writers, or a writer beside a reader.
   */
  | "capacity"
  /**
   * A grant that came after another (in real time) does not have a greater token (a read: a
   * smaller one); or two grants that each take a new token share one.
   */
  | "token-order"
  /** The fence accepted a token lower than one it had accepted before. */
  | "fence-order"
  /** The fence rejected a token at least as high as every token it had accepted before. */
  | "fence-rejected-current"
  /** A read misses a write that was acknowledged before the read began. */
  | "lost-write"
  /** A read shows a write the fence rejected. */
  | "rejected-write-visible"
  /** A plain write by a process without a certain hold while another process held the key. */
  | "unfenced-write"
  /** A timed-out acquire recorded as failed (it is unknown: the store may have granted it). */
  | "timeout-as-failure";

/** One broken invariant, with a readable message and the entries involved. */
export interface Violation {
  readonly kind: ViolationKind;
  readonly message: string;
  readonly entries: readonly HistoryEntry[];
}

/** Options of {@link checkHistory}. */
export interface CheckOptions {
  /**
   * The backend declares fencing tokens ("monotonic" or "single-node"): check that later
   * grants have greater tokens. Without it only the token-free invariants are checked.
   */
  readonly fencing: boolean;
}

const TIMEOUT_REASON = /timeout|timed out|BATON_LOCK_TIMEOUT|BATON_BACKEND_UNAVAILABLE/i;

/**
 * Checks a history against the invariants below and returns every violation (empty when
 * the history is clean). Holds are the certain holds of {@link certainHolds}.
 *
 * - overlap: no two certain holds of a lock overlap;
 * - capacity: at no time do the certain permit holds of a key take more permits than its
 *   limit (a write takes all of a read-write lock's, a read one);
 * - token-order (with `fencing`): for successful acquires A and B of a key, B's token is
 *   greater than A's whenever A precedes B: A's reply was received before B was invoked, or
 *   A's certain hold ended before B's began and the two cannot be held at once (permits
 *   granted together may each be told at its own time). A read carries the newest write's
 *   token, so a read B need only not be smaller than A's; and two permit grants that each
 *   take a new token (a semaphore's permits, writes) never share one, whatever their order;
 * - fence-order: the fence's accepted tokens never decrease (in completion order); and it
 *   rejects only a token lower than one it accepted before the rejected write began;
 * - lost-write: a read shows every write acknowledged (fence accepted, or plain) before the
 *   read began, and no write the fence rejected;
 * - unfenced-write: a plain write by a process that has no certain hold of the key over the
 *   whole write, while another process's certain hold overlaps it;
 * - timeout-as-failure: an acquire that timed out must be recorded as `unknown`.
 */
export function checkHistory(
  history: History | readonly HistoryEntry[],
  options: CheckOptions,
): Violation[] {
  const entries = history instanceof History ? history.entries : history;
  const origin = history instanceof History ? history.origin : 0;
  const t = (at: number | undefined) => formatTime(at, origin);
  const holdText = (h: CertainHold) =>
    `${h.process} held ${h.share === undefined ? "" : `${shareText(h.share)} `}token ${h.token} from ${t(h.start)} to ${t(h.end)} (${h.endedBy === "open" ? "still open" : `ended by ${h.endedBy}`})`;
  const violations: Violation[] = [];
  const holds = certainHolds(entries);
  const byKey = groupBy(holds, (h) => h.key);

  for (const [key, keyHolds] of byKey) {
    const sorted = keyHolds.filter((h) => h.share === undefined).sort((a, b) => a.start - b.start);
    for (let i = 0; i < sorted.length; i++) {
      const a = sorted[i] as CertainHold;
      for (let j = i + 1; j < sorted.length; j++) {
        const b = sorted[j] as CertainHold;
        if (b.start >= a.end) continue;
        violations.push({
          kind: "overlap",
          message: `overlap on "${key}": ${holdText(a)}, while ${holdText(b)}`,
          entries: [a.acquire, b.acquire],
        });
      }
    }
  }

  for (const [key, keyHolds] of byKey) {
    const permitHolds = keyHolds.filter((h) => h.share !== undefined);
    for (const over of overCapacity(permitHolds)) {
      const limit = Math.min(...over.map((h) => (h.share as PermitShare).limit));
      const taken = over.reduce((sum, h) => sum + (h.share as PermitShare).permits, 0);
      const at = Math.max(...over.map((h) => h.start));
      const what = over.some((h) => h.share?.mode !== "permit")
        ? "holds beyond a read-write lock's (a writer beside another holder)"
        : `${taken} permits of ${limit}`;
      violations.push({
        kind: "capacity",
        message: `capacity of "${key}": ${what} certainly held at once at ${t(at)}: ${over.map(holdText).join("; ")}`,
        entries: over.map((h) => h.acquire),
      });
    }
  }

  if (options.fencing) {
    const holdOf = new Map<AcquireOp, CertainHold>(holds.map((h) => [h.acquire, h]));
    const granted = entries.filter(
      (e): e is AcquireOp => e.type === "acquire" && e.result?.status === "ok",
    );
    for (const [key, acquires] of groupBy(granted, (a) => a.key)) {
      for (const [i, a] of acquires.entries()) {
        for (const [j, b] of acquires.entries()) {
          if (a === b) continue;
          // Permits and locks of one name are unrelated; each kind is checked on its own.
          if ((a.share === undefined) !== (b.share === undefined)) continue;
          const ta = tokenOf(a);
          const tb = tokenOf(b);
          if (j > i && a.share !== undefined && newToken(a) && newToken(b) && ta === tb) {
            violations.push({
              kind: "token-order",
              message: `token order on "${key}": ${a.process}'s grant at ${t(a.completeAt)} and ${b.process}'s at ${t(b.completeAt)} share token ${ta}, although each takes a new one`,
              entries: [a, b],
            });
            continue;
          }
          const ha = holdOf.get(a);
          const hb = holdOf.get(b);
          const replyFirst = (a.completeAt as number) < b.invokeAt;
          // A hold that ended before another began orders their grants only if the two
          // cannot be held at once: permits granted together may be told apart late.
          const holdFirst =
            ha !== undefined && hb !== undefined && ha.end <= hb.start && excludes(a, b);
          if (!replyFirst && !holdFirst) continue;
          if (newToken(b) ? tb > ta : tb >= ta) continue;
          const why = replyFirst
            ? `${a.process}'s grant was received at ${t(a.completeAt)}, before ${b.process} asked at ${t(b.invokeAt)}`
            : `${a.process}'s certain hold ended at ${t(ha?.end)}, before ${b.process}'s began at ${t(hb?.start)}`;
          violations.push({
            kind: "token-order",
            message: `token order on "${key}": ${b.process} got token ${tb}${b.share?.mode === "read" ? " for a read, smaller than" : ", not greater than"} ${a.process}'s token ${ta}, although ${why}`,
            entries: [a, b],
          });
        }
      }
    }
  }

  const writes = entries.filter((e): e is WriteOp => e.type === "write");
  for (const [key, keyWrites] of groupBy(
    writes.filter((w) => w.fenced && w.result !== undefined),
    (w) => w.key,
  )) {
    const decided = [...keyWrites].sort(
      (a, b) => (a.completeAt as number) - (b.completeAt as number),
    );
    let highest: WriteOp | undefined;
    for (const w of decided) {
      if (w.result !== "accepted" || w.token === undefined) continue;
      if (highest?.token !== undefined && w.token < highest.token) {
        violations.push({
          kind: "fence-order",
          message: `fence on "${key}" accepted ${w.process}'s token ${w.token} at ${t(w.completeAt)} after accepting ${highest.process}'s token ${highest.token} at ${t(highest.completeAt)}`,
          entries: [highest, w],
        });
      } else highest = w;
    }
    for (const w of decided) {
      if (w.result !== "rejected" || w.token === undefined) continue;
      const before = decided.filter(
        (o) =>
          o.result === "accepted" && o.token !== undefined && (o.completeAt as number) < w.invokeAt,
      );
      const max = before.reduce<bigint | undefined>(
        (m, o) => (m === undefined || (o.token as bigint) > m ? o.token : m),
        undefined,
      );
      if (max === undefined || w.token >= max) {
        violations.push({
          kind: "fence-rejected-current",
          message: `fence on "${key}" rejected ${w.process}'s token ${w.token} at ${t(w.completeAt)} although the highest token it had accepted before was ${max ?? "none"}`,
          entries: [w],
        });
      }
    }
  }

  for (const read of entries.filter((e): e is ReadOp => e.type === "read")) {
    const shown = new Set(read.values);
    for (const w of writes) {
      if (w.key !== read.key || w.value === undefined || w.completeAt === undefined) continue;
      if (w.result === "accepted" && w.completeAt < read.invokeAt && !shown.has(w.value)) {
        violations.push({
          kind: "lost-write",
          message: `write "${w.value}" by ${w.process} to "${read.key}", acknowledged at ${t(w.completeAt)}, is missing from ${read.process}'s read at ${t(read.invokeAt)}`,
          entries: [w, read],
        });
      }
      if (w.result === "rejected" && shown.has(w.value)) {
        violations.push({
          kind: "rejected-write-visible",
          message: `write "${w.value}" by ${w.process} to "${read.key}" was rejected by the fence at ${t(w.completeAt)} but shows in ${read.process}'s read at ${t(read.invokeAt)}`,
          entries: [w, read],
        });
      }
    }
  }

  for (const w of writes) {
    if (w.fenced || w.result !== "accepted") continue;
    const from = w.invokeAt;
    const to = w.completeAt ?? w.invokeAt;
    const keyHolds = byKey.get(w.key) ?? [];
    const covered = keyHolds.some((h) => h.process === w.process && h.start <= from && to < h.end);
    if (covered) continue;
    const other = keyHolds.find((h) => h.process !== w.process && h.start <= to && from < h.end);
    if (other === undefined) continue;
    violations.push({
      kind: "unfenced-write",
      message: `plain write${w.value !== undefined ? ` "${w.value}"` : ""} to "${w.key}" by ${w.process}${w.token !== undefined ? ` (token ${w.token})` : ""} at ${t(from)} without a certain hold, while ${holdText(other)}`,
      entries: [w, other.acquire],
    });
  }

  for (const e of entries) {
    if (e.type !== "acquire" || e.result?.status !== "fail") continue;
    if (!TIMEOUT_REASON.test(e.result.reason)) continue;
    violations.push({
      kind: "timeout-as-failure",
      message: `${e.process}'s acquire of "${e.key}" at ${t(e.invokeAt)} timed out (${e.result.reason}) but was recorded as failed; a timeout is unknown (the store may have granted it)`,
      entries: [e],
    });
  }
  return violations;
}

/** Two grants of one key that cannot be held at once: locks, or permits beyond the limit. */
function excludes(a: AcquireOp, b: AcquireOp): boolean {
  if (a.share === undefined || b.share === undefined) return true;
  return a.share.permits + b.share.permits > Math.min(a.share.limit, b.share.limit);
}

/** A lock's grant, a semaphore's permits and a write take a new token; a read does not. */
function newToken(op: AcquireOp): boolean {
  return op.share?.mode !== "read";
}

/**
 * The sets of `holds` (all of one key) certainly held at once that take more permits than
 * the limit: one per stretch of time over the limit, as it stood when that stretch began.
 */
function overCapacity(holds: readonly CertainHold[]): CertainHold[][] {
  // Ends before starts at one instant: a hold's end is exclusive.
  const moments = holds
    .flatMap((h) => [
      { at: h.start, hold: h, starts: true },
      { at: h.end, hold: h, starts: false },
    ])
    .sort((a, b) => a.at - b.at || Number(a.starts) - Number(b.starts));
  const current = new Set<CertainHold>();
  const found: CertainHold[][] = [];
  let over = false;
  for (const m of moments) {
    if (m.starts) current.add(m.hold);
    else current.delete(m.hold);
    let taken = 0;
    let limit = Number.POSITIVE_INFINITY;
    for (const h of current) {
      const share = h.share as PermitShare;
      taken += share.permits;
      limit = Math.min(limit, share.limit);
    }
    const nowOver = taken > limit;
    if (nowOver && !over) found.push([...current]);
    over = nowOver;
  }
  return found;
}

function tokenOf(op: AcquireOp): bigint {
  if (op.result?.status !== "ok") throw new Error("history: not a granted acquire");
  return op.result.token;
}

function groupBy<T>(items: readonly T[], keyOf: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    const group = groups.get(key);
    if (group === undefined) groups.set(key, [item]);
    else group.push(item);
  }
  return groups;
}
