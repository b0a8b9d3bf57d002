import type { PermitMode, RunOutcome } from "@baton/core";

/**
 * How a write loop asks whether it may write: `lock.held`, `lock.throwIfLost()`,
 * `lock.signal.aborted` or `lock.signal.throwIfAborted()`.
 */
export type TickCheck = "held" | "throwIfLost" | "aborted" | "throwIfAborted";

/** Commands a lock worker reads on stdin (one JSON object per line). */
export type WorkerCommand =
  | { op: "acquire"; name: string; waitMs?: number; value?: string }
  | { op: "release"; name: string }
  | { op: "held"; name: string }
  /** `unchecked`: write without checking the lock first (a careless user; the fence must stop it). */
  | { op: "write"; name: string; seq?: number; unchecked?: boolean }
  /**
   * Writes every `everyMs` while the lock is held. `check` is how the loop asks before each
   * write, as users do (default `held`: `lock.held`, or `isLeader` for an election); the
   * signal checks need a lock. `unchecked`: keep writing regardless (a careless user).
   */
  | { op: "tick"; name: string; everyMs: number; unchecked?: boolean; check?: TickCheck }
  /**
   * Takes permits of semaphore `name` (`mode` "permit": `permits` of its `limit`, default 1
   * of 1) or a read or write lock of read-write lock `name`, known from then on as `hold`
   * (one worker may hold several of one name at once). Answers `permits-acquired`, or an
   * `error` naming the hold.
   */
  | {
      op: "acquire-permits";
      name: string;
      hold: string;
      mode: PermitMode;
      permits?: number;
      limit?: number;
      waitMs?: number;
    }
  /** Releases the permits `hold`; answers `permits-released`. */
  | { op: "release-permits"; hold: string }
  | { op: "elect"; name: string; value?: string }
  | { op: "resign"; name: string }
  | { op: "leader"; name: string }
  | { op: "observe"; name: string }
  | { op: "close-election"; name: string }
  | { op: "partitions"; name: string; count: number }
  | { op: "owned"; name: string }
  | { op: "enable-metrics" }
  | { op: "metrics" }
  /**
   * `coordinator.runOnce(job, slot, fn, options)` with a job that sleeps `holdMs` without
   * looking at its signal, then writes (a `job-wrote` event, for the runner's fence); the
   * result comes as a `job-result` event.
   */
  | {
      op: "run-once";
      job: string;
      slot: string;
      holdMs: number;
      waitMs?: number;
      atMostMs?: number;
      maxAttempts?: number;
    }
  /**
   * `coordinator.schedule(cron, job, fn, options)` with the job of `run-once`, on a wall
   * clock `clockSkewMs` ahead of the real one (behind when negative); a `job-result` event
   * per slot.
   */
  | {
      op: "schedule";
      job: string;
      cron: string;
      holdMs: number;
      clockSkewMs?: number;
      atMostMs?: number;
      catchUpMs?: number;
    }
  /** Stops the schedule of `job` (waits for a run under way here); answers `schedule-stopped`. */
  | { op: "stop-schedule"; job: string }
  | { op: "exit" };

/** Events a lock worker writes on stdout (one JSON object per line). Tokens are decimal strings. */
export type WorkerEvent =
  | { event: "ready"; pid: number }
  | { event: "acquired"; name: string; token: string }
  | { event: "released"; name: string; wasHeld: boolean }
  | { event: "held"; name: string; held: boolean }
  /**
   * A write made. `checkedAt`: when the loop's check passed, from the system-wide monotonic
   * clock (`process.hrtime.bigint()`, ns, decimal), so a test can tell a write whose check
   * passed after a pause from one whose check passed before the pause struck.
   */
  | { event: "wrote"; name: string; token: string; seq: number; checkedAt?: string }
  /** A write not made: the lock was not held (`reason`: the loss reason, when the check told it). */
  | { event: "refused"; name: string; reason?: string }
  /** The lock ended other than by release; `detail`: a forced release's reason, when given. */
  | { event: "lost"; name: string; token: string; reason: string; detail?: string }
  | { event: "renewFailed"; message: string; remainingMs: number }
  /** A command failed; `hold`: the permits it was about (for `acquire-permits`). */
  | { event: "error"; op: string; code: string; message: string; hold?: string }
  | { event: "permits-acquired"; name: string; hold: string; mode: PermitMode; token: string }
  | { event: "permits-released"; name: string; hold: string; wasHeld: boolean }
  /** The permits `hold` ended other than by release: their signal aborted with `reason`. */
  | { event: "permits-lost"; name: string; hold: string; token: string; reason: string }
  | { event: "elected"; name: string; term: string }
  | { event: "revoked"; name: string; term: string; reason: string }
  | { event: "resigned"; name: string }
  | { event: "leader"; name: string; isLeader: boolean; term: string | null; leader: string | null }
  | { event: "observed"; name: string; leader: string | null; term: string | null }
  | { event: "election-closed"; name: string }
  | { event: "assigned"; name: string; partition: number; token: string }
  | { event: "unassigned"; name: string; partition: number; token: string; reason: string }
  | { event: "owned"; name: string; partitions: number[] }
  | { event: "metrics-enabled" }
  | { event: "metrics"; text: string }
  /** A job's attempt started here (`fn` was called). */
  | { event: "job-started"; job: string; slot: string; attempt: number; token: string }
  /** A job's attempt made its write, with its token: the runner passes it through a fence. */
  | { event: "job-wrote"; job: string; slot: string; attempt: number; token: string }
  /**
   * What `runOnce` (or one slot of a schedule) resolved with here. `error`: the failure's
   * class name (`LockLostError`, `RunTimeoutError`...); `holder`: who ran a slot found done.
   */
  | {
      event: "job-result";
      job: string;
      slot: string;
      outcome: RunOutcome;
      attempt?: number;
      token?: string;
      error?: string;
      holder?: string;
    }
  | { event: "schedule-stopped"; job: string }
  | { event: "exited" };
