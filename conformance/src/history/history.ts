/**
 * A history of lock operations as the test runner saw them, for {@link checkHistory}. Every
 * time is the runner's `performance.now()` (one monotonic clock for every process): an
 * operation has the time it was invoked and the time its outcome was received; an event (a
 * loss, a pause) has the time it was recorded.
 */

import { type PermitMode, READ_WRITE_LIMIT } from "@baton/core";

/**
 * What a permit acquire takes: `permits` of the key's `limit` (a semaphore's permits, or a
 * read-write lock's: a read takes 1 of `READ_WRITE_LIMIT`, a write all of them), and how its
 * token is taken (`mode`).
 */
export interface PermitShare {
  readonly permits: number;
  readonly limit: number;
  readonly mode: PermitMode;
}

/** What a read-write lock's read takes: 1 of `READ_WRITE_LIMIT` permits. */
export const READ_SHARE: PermitShare = { permits: 1, limit: READ_WRITE_LIMIT, mode: "read" };

/** What a read-write lock's write takes: all `READ_WRITE_LIMIT` permits. */
export const WRITE_SHARE: PermitShare = {
  permits: READ_WRITE_LIMIT,
  limit: READ_WRITE_LIMIT,
  mode: "write",
};

/** Outcome of an acquire. */
export type AcquireResult =
  /** Granted: `deadline` is the holder's local deadline on the runner's clock, when known. */
  | { readonly status: "ok"; readonly token: bigint; readonly deadline?: number }
  /** Definitely not granted (e.g. `LockHeldError` from a try). */
  | { readonly status: "fail"; readonly reason: string }
  /** Maybe granted: timed out, store unreachable, no answer. Never a failure. */
  | { readonly status: "unknown"; readonly reason: string };

/** Outcome of a release. */
export type ReleaseResult =
  | { readonly status: "ok"; readonly wasHeld: boolean }
  | { readonly status: "unknown"; readonly reason: string };

interface EntryBase {
  /** Position in the history (0, 1, ...). */
  readonly id: number;
  /** Who did it: a worker, an in-process coordinator, the runner. */
  readonly process: string;
}

/**
 * An acquire of `key`; `completeAt`/`result` stay undefined while it is pending (unknown).
 * A permit acquire has a `share`, and a `hold` naming it among the holds its process may have
 * of the key at once.
 */
export interface AcquireOp extends EntryBase {
  readonly type: "acquire";
  readonly key: string;
  /** Set for a semaphore's permits or a read-write lock's read or write; unset for a lock. */
  readonly share: PermitShare | undefined;
  /** Which of the process's holds of `key` this is (permits); a release or loss names it. */
  readonly hold: string | undefined;
  readonly invokeAt: number;
  readonly completeAt: number | undefined;
  readonly result: AcquireResult | undefined;
}

/**
 * A release of `key`: of the process's hold `hold`, or, without one, of every hold it has of
 * the key.
 */
export interface ReleaseOp extends EntryBase {
  readonly type: "release";
  readonly key: string;
  readonly hold: string | undefined;
  readonly invokeAt: number;
  readonly completeAt: number | undefined;
  readonly result: ReleaseResult | undefined;
}

/**
 * A renewal of the process's session, confirmed (`ok`) or failed, at `at`. `deadline` is the
 * local deadline it set, when known.
 */
export interface RenewEvent extends EntryBase {
  readonly type: "renew";
  readonly at: number;
  readonly ok: boolean;
  readonly deadline: number | undefined;
}

/**
 * The process reported its grant of `key` lost (deadline, session lost, key lost...): its
 * hold `hold`, or, without one, its grant with `token` (any grant of the key without either).
 */
export interface LostEvent extends EntryBase {
  readonly type: "lost";
  readonly key: string;
  readonly hold: string | undefined;
  readonly token: bigint | undefined;
  readonly reason: string;
  readonly at: number;
}

/** The process was frozen (SIGSTOP), thawed (SIGCONT) or killed (SIGKILL) at `at`. */
export interface ProcessEvent extends EntryBase {
  readonly type: "pause" | "resume" | "crash";
  readonly at: number;
}

/**
 * A write to the resource `key` guarded by the lock. `fenced`: it went through a fence, which
 * `accepted` or `rejected` it; a plain write is always `accepted` (nothing checks it).
 */
export interface WriteOp extends EntryBase {
  readonly type: "write";
  readonly key: string;
  readonly token: bigint | undefined;
  readonly fenced: boolean;
  /** What was written (so a read can show it), if anything. */
  readonly value: string | undefined;
  readonly invokeAt: number;
  readonly completeAt: number | undefined;
  readonly result: "accepted" | "rejected" | undefined;
}

/** A read of the resource `key`: every value written to it, as stored. */
export interface ReadOp extends EntryBase {
  readonly type: "read";
  readonly key: string;
  readonly invokeAt: number;
  readonly completeAt: number;
  readonly values: readonly string[];
}

/** One entry of a {@link History}. */
export type HistoryEntry =
  | AcquireOp
  | ReleaseOp
  | RenewEvent
  | LostEvent
  | ProcessEvent
  | WriteOp
  | ReadOp;

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** Completes a pending acquire. */
export interface AcquireHandle {
  readonly op: AcquireOp;
  ok(token: bigint, options?: { deadline?: number; at?: number }): void;
  fail(reason: string, at?: number): void;
  unknown(reason: string, at?: number): void;
}

/** Completes a pending release. */
export interface ReleaseHandle {
  readonly op: ReleaseOp;
  done(wasHeld: boolean, at?: number): void;
  unknown(reason: string, at?: number): void;
}

/** Completes a pending write. */
export interface WriteHandle {
  readonly op: WriteOp;
  accepted(at?: number): void;
  rejected(at?: number): void;
}

/**
 * Records operations with invoke/complete times from one monotonic clock. Feed it from
 * worker events ({@link RecordedWorker}) and in-process coordinators
 * ({@link RecordedCoordinator}), or by hand; check it with {@link checkHistory}.
 *
 * @example
 * const history = new History();
 * const a = history.invokeAcquire("w1", "job");
 * a.ok(7n);
 * history.pause("w1");
 * checkHistory(history, { fencing: true }); // []
 */
export class History {
  readonly #entries: HistoryEntry[] = [];
  readonly #clock: () => number;
  /** Time the history was created (messages show times relative to it). */
  readonly origin: number;

  constructor(clock: () => number = () => performance.now()) {
    this.#clock = clock;
    this.origin = clock();
  }

  /** The clock's current time. */
  now(): number {
    return this.#clock();
  }

  /** Every entry, in the order recorded. */
  get entries(): readonly HistoryEntry[] {
    return this.#entries;
  }

  #add<E extends HistoryEntry>(entry: Omit<E, "id">): Mutable<E> {
    const full = { id: this.#entries.length, ...entry } as Mutable<E>;
    this.#entries.push(full as unknown as HistoryEntry);
    return full;
  }

  /** Completes `op` once: its result, and when (now by default); later calls are ignored. */
  #completer<R>(op: {
    result: R | undefined;
    completeAt: number | undefined;
  }): (result: R, when: number | undefined) => void {
    return (result, when) => {
      if (op.result !== undefined) return;
      op.result = result;
      op.completeAt = when ?? this.now();
    };
  }

  /** Records the start of an acquire; complete it with the handle. */
  invokeAcquire(process: string, key: string, at = this.now()): AcquireHandle {
    return this.#invokeAcquire(process, key, undefined, undefined, at);
  }

  /**
   * Records the start of a permit acquire (a semaphore's permits, a read or a write) that
   * `process` will know as `hold`; complete it with the handle.
   */
  invokePermits(
    process: string,
    key: string,
    share: PermitShare,
    hold: string,
    at = this.now(),
  ): AcquireHandle {
    return this.#invokeAcquire(process, key, { ...share }, hold, at);
  }

  #invokeAcquire(
    process: string,
    key: string,
    share: PermitShare | undefined,
    hold: string | undefined,
    at: number,
  ): AcquireHandle {
    const op = this.#add<AcquireOp>({
      type: "acquire",
      process,
      key,
      share,
      hold,
      invokeAt: at,
      completeAt: undefined,
      result: undefined,
    });
    const complete = this.#completer(op);
    return {
      op,
      ok: (token, options = {}) =>
        complete(
          {
            status: "ok",
            token,
            ...(options.deadline !== undefined ? { deadline: options.deadline } : {}),
          },
          options.at,
        ),
      fail: (reason, when) => complete({ status: "fail", reason }, when),
      unknown: (reason, when) => complete({ status: "unknown", reason }, when),
    };
  }

  /**
   * Records the start of a release (of the process's hold `hold` of `key`, or of all of them
   * without one); complete it with the handle.
   */
  invokeRelease(process: string, key: string, at = this.now(), hold?: string): ReleaseHandle {
    const op = this.#add<ReleaseOp>({
      type: "release",
      process,
      key,
      hold,
      invokeAt: at,
      completeAt: undefined,
      result: undefined,
    });
    const complete = this.#completer(op);
    return {
      op,
      done: (wasHeld, when) => complete({ status: "ok", wasHeld }, when),
      unknown: (reason, when) => complete({ status: "unknown", reason }, when),
    };
  }

  /** Records the start of a write (plain writes: call `accepted()` once stored). */
  invokeWrite(
    process: string,
    key: string,
    write: { token?: bigint; fenced: boolean; value?: string },
    at = this.now(),
  ): WriteHandle {
    const op = this.#add<WriteOp>({
      type: "write",
      process,
      key,
      token: write.token,
      fenced: write.fenced,
      value: write.value,
      invokeAt: at,
      completeAt: undefined,
      result: undefined,
    });
    const complete = this.#completer(op);
    return {
      op,
      accepted: (when) => complete("accepted", when),
      rejected: (when) => {
        if (!op.fenced) throw new Error("history: a plain write cannot be rejected");
        complete("rejected", when);
      },
    };
  }

  /** Records a plain (unfenced) write, stored at once. */
  plainWrite(
    process: string,
    key: string,
    write: { token?: bigint; value?: string } = {},
    at = this.now(),
  ): WriteOp {
    const handle = this.invokeWrite(process, key, { ...write, fenced: false }, at);
    handle.accepted(at);
    return handle.op;
  }

  /** Records a read of every value stored for `key`. */
  read(
    process: string,
    key: string,
    values: readonly string[],
    at: { invokeAt?: number; completeAt?: number } = {},
  ): ReadOp {
    const invokeAt = at.invokeAt ?? this.now();
    return this.#add<ReadOp>({
      type: "read",
      process,
      key,
      invokeAt,
      completeAt: at.completeAt ?? invokeAt,
      values: [...values],
    });
  }

  /** Records a renewal of `process`'s session. */
  renew(process: string, renewal: { ok: boolean; deadline?: number; at?: number }): RenewEvent {
    return this.#add<RenewEvent>({
      type: "renew",
      process,
      ok: renewal.ok,
      deadline: renewal.deadline,
      at: renewal.at ?? this.now(),
    });
  }

  /** Records that `process` reported its grant of `key` lost. */
  lost(
    process: string,
    key: string,
    loss: { token?: bigint; reason: string; at?: number; hold?: string },
  ): LostEvent {
    return this.#add<LostEvent>({
      type: "lost",
      process,
      key,
      hold: loss.hold,
      token: loss.token,
      reason: loss.reason,
      at: loss.at ?? this.now(),
    });
  }

  /** Records that `process` was frozen (SIGSTOP): its holds end here. */
  pause(process: string, at = this.now()): ProcessEvent {
    return this.#add<ProcessEvent>({ type: "pause", process, at });
  }

  /** Records that `process` was thawed (SIGCONT). */
  resume(process: string, at = this.now()): ProcessEvent {
    return this.#add<ProcessEvent>({ type: "resume", process, at });
  }

  /** Records that `process` was killed: its holds end here. */
  crash(process: string, at = this.now()): ProcessEvent {
    return this.#add<ProcessEvent>({ type: "crash", process, at });
  }

  /** A readable dump, one entry per line, times in ms since the history began. */
  describe(): string {
    return this.#entries.map((e) => describeEntry(e, this.origin)).join("\n");
  }
}

/** Formats a time relative to `origin`, e.g. `"+1234.5 ms"`. */
export function formatTime(at: number | undefined, origin: number): string {
  if (at === undefined) return "never";
  if (!Number.isFinite(at)) return "open";
  return `+${(at - origin).toFixed(1)} ms`;
}

/** One line describing `entry`. */
export function describeEntry(entry: HistoryEntry, origin: number): string {
  const t = (at: number | undefined) => formatTime(at, origin);
  const head = `#${entry.id} ${entry.process}`;
  switch (entry.type) {
    case "acquire": {
      const r = entry.result;
      const outcome =
        r === undefined
          ? "pending (unknown)"
          : r.status === "ok"
            ? `ok token ${r.token}${r.deadline !== undefined ? ` deadline ${t(r.deadline)}` : ""}`
            : `${r.status} (${r.reason})`;
      const what =
        entry.share === undefined ? "acquire" : `${shareText(entry.share)} ${entry.hold}`;
      return `${head} ${what} "${entry.key}" ${t(entry.invokeAt)}..${t(entry.completeAt)}: ${outcome}`;
    }
    case "release": {
      const r = entry.result;
      const outcome =
        r === undefined
          ? "pending"
          : r.status === "ok"
            ? `wasHeld=${r.wasHeld}`
            : `unknown (${r.reason})`;
      const hold = entry.hold === undefined ? "" : ` ${entry.hold}`;
      return `${head} release${hold} "${entry.key}" ${t(entry.invokeAt)}..${t(entry.completeAt)}: ${outcome}`;
    }
    case "renew":
      return `${head} renew ${entry.ok ? "ok" : "failed"} at ${t(entry.at)}${entry.deadline !== undefined ? ` deadline ${t(entry.deadline)}` : ""}`;
    case "lost":
      return `${head} lost${entry.hold === undefined ? "" : ` ${entry.hold}`} "${entry.key}"${entry.token !== undefined ? ` token ${entry.token}` : ""} (${entry.reason}) at ${t(entry.at)}`;
    case "pause":
    case "resume":
    case "crash":
      return `${head} ${entry.type} at ${t(entry.at)}`;
    case "write":
      return `${head} ${entry.fenced ? "fenced" : "plain"} write "${entry.key}"${entry.token !== undefined ? ` token ${entry.token}` : ""}${entry.value !== undefined ? ` value ${entry.value}` : ""} ${t(entry.invokeAt)}..${t(entry.completeAt)}: ${entry.result ?? "pending"}`;
    case "read":
      return `${head} read "${entry.key}" ${t(entry.invokeAt)}..${t(entry.completeAt)}: [${entry.values.join(", ")}]`;
  }
}

/** `"2 permits"`, `"read"`, `"write"`: what a permit acquire takes, for messages. */
export function shareText(share: PermitShare): string {
  if (share.mode !== "permit") return share.mode;
  return `${share.permits} permit${share.permits === 1 ? "" : "s"} of ${share.limit}`;
}
