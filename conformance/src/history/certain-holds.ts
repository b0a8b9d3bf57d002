import type { AcquireOp, HistoryEntry, PermitShare, RenewEvent } from "./history.js";

/** Why a certain hold ended. */
export type HoldEnd = "release" | "lost" | "deadline" | "pause" | "crash" | "open";

/**
 * A stretch of time in which a process certainly held a key (see {@link certainHolds}).
 * `start` is inclusive, `end` exclusive; `end` is `Infinity` while the hold is still open.
 */
export interface CertainHold {
  readonly acquire: AcquireOp;
  readonly process: string;
  readonly key: string;
  readonly token: bigint;
  /** What a permit hold takes of the key (unset for a lock's hold). */
  readonly share: PermitShare | undefined;
  /** Which of its process's holds of the key this is (permits). */
  readonly hold: string | undefined;
  readonly start: number;
  readonly end: number;
  readonly endedBy: HoldEnd;
}

/**
 * The certain holds in a history. A hold starts when a successful acquire's reply was
 * received (`completeAt`) and ends at the earliest of:
 *
 * - the invocation of the process's next release of the key (it stops relying on the lock
 *   when it asks to give it up); for a permit hold, the next release of that hold, or one
 *   naming no hold;
 * - the process's next reported loss of the key (by the time it was received): of that hold
 *   or, for a loss that names none, of that token;
 * - the process's local deadline, when known: the acquire's `deadline`, moved later by each
 *   renewal of that process confirmed before the deadline then current (a renewal confirmed
 *   after it is too late: the deadline passed first);
 * - the process's next pause (SIGSTOP) or crash: a frozen process cannot know its lease is
 *   running out, so what it does after it thaws is no longer covered by the lock. Writes it
 *   makes after SIGCONT are uncovered: a fence must reject them, and a plain write then is a
 *   violation as soon as another process holds the key.
 *
 * An acquire whose outcome is `unknown` (timed out, no answer) or still pending gives no
 * certain hold; it is not a failure either (the store may have granted it). A hold whose end
 * is not after its start (its deadline had passed before the reply arrived) is empty and is
 * not returned.
 */
export function certainHolds(entries: readonly HistoryEntry[]): CertainHold[] {
  const holds: CertainHold[] = [];
  for (const entry of entries) {
    if (entry.type !== "acquire" || entry.result?.status !== "ok") continue;
    const start = entry.completeAt as number;
    const token = entry.result.token;
    const sameHold = (hold: string | undefined) =>
      hold === undefined || entry.hold === undefined || hold === entry.hold;
    let end = Number.POSITIVE_INFINITY;
    let endedBy: HoldEnd = "open";
    const consider = (at: number, why: HoldEnd, onTie = false) => {
      if (at < end || (onTie && at === end)) {
        end = at;
        endedBy = why;
      }
    };
    const renewals: RenewEvent[] = [];
    for (const other of entries) {
      if (other.process !== entry.process) continue;
      switch (other.type) {
        case "release":
          if (other.key === entry.key && other.invokeAt >= start && sameHold(other.hold))
            consider(other.invokeAt, "release");
          break;
        case "lost":
          if (
            other.key === entry.key &&
            other.at >= start &&
            (other.hold !== undefined
              ? sameHold(other.hold)
              : other.token === undefined || other.token === token)
          )
            consider(other.at, "lost");
          break;
        case "pause":
        case "crash":
          if (other.at >= start) consider(other.at, other.type);
          break;
        case "renew":
          if (other.at >= start) renewals.push(other);
          break;
        default:
          break;
      }
    }
    const deadline = localDeadline(entry.result.deadline, renewals);
    // A loss recorded at the deadline itself was that deadline: name the cause.
    if (deadline !== undefined) consider(deadline, "deadline", true);
    if (end > start) {
      holds.push({
        acquire: entry,
        process: entry.process,
        key: entry.key,
        token,
        share: entry.share,
        hold: entry.hold,
        start,
        end,
        endedBy,
      });
    }
  }
  return holds;
}

/** The deadline after `renewals` (sorted here): each confirmed in time moves it later. */
function localDeadline(initial: number | undefined, renewals: RenewEvent[]): number | undefined {
  if (initial === undefined) return undefined;
  let deadline = initial;
  for (const renewal of [...renewals].sort((a, b) => a.at - b.at)) {
    if (renewal.at >= deadline) break;
    if (renewal.ok && renewal.deadline !== undefined && renewal.deadline > deadline) {
      deadline = renewal.deadline;
    }
  }
  return deadline;
}
