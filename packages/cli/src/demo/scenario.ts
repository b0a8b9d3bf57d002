import { randomUUID } from "node:crypto";
import { ConfigError, type Coordinator, createCoordinator, sleep, systemClock } from "@baton/core";
import { loadAdapter } from "../load-adapter.js";
import { InvoiceTable } from "./invoice-table.js";
import { PausableClock } from "./pausable-clock.js";
import { RecordingFence } from "./recording-fence.js";
import { startRemoteRunner } from "./remote-runner.js";
import { type InvoiceJob, type Runner, runScheduler } from "./runner.js";
import type { TimelineEvent } from "./timeline.js";

/** One way of guarding the job: a row of the demo's table. */
export interface Variant {
  readonly name: string;
  /** Check `lock.signal` before each write. */
  readonly checkSignal: boolean;
  /** Correctness mode with a `MemoryFence`; every bill is written through it. */
  readonly fenced: boolean;
}

/** The knobs of one run of the story. */
export interface ScenarioSettings {
  /** Lease length of every runner, in ms. */
  readonly ttlMs: number;
  /** Number of clients to bill. */
  readonly clients: number;
  /** Preparing one bill takes between these many ms. */
  readonly billMs: readonly [min: number, max: number];
  /** Runner 1 freezes just before writing this bill (1-based). */
  readonly freezeBeforeBill: number;
  /** Runner 1 wakes this long after runner 2 took over. */
  readonly resumeAfterTakeoverMs: number;
  /** The month billed. */
  readonly month: string;
  /**
   * The lock service: a backend URL (default `memory://` with a store of the run's own).
   * Runner 1's pause is simulated in process (its timers and code stop; the store's clock
   * does not), so any backend can play the story.
   */
  readonly backend?: string;
}

/** What one variant did. */
export interface VariantResult {
  readonly variant: string;
  /** From the freeze to runner 2 holding the lock, in ms; `null` if runner 2 never took over. */
  readonly takeoverMs: number | null;
  /** Bills that landed after their writer had lost the lease. */
  readonly staleAccepted: number;
  /** Writes the fence rejected for a stale token. */
  readonly staleRejected: number;
  /** Clients billed more than once: what a (client, month) primary key had to swallow. */
  readonly duplicates: number;
  /** Runner 1's first token. */
  readonly runner1Token: bigint | null;
  /** The token of the takeover (the first grant to runner 2 or runner 3). */
  readonly runner2Token: bigint | null;
  /** Clients with an invoice at the end (all of them, in every variant). */
  readonly billed: number;
  /** Why the variant did not run (correctness mode refused the backend), if it did not. */
  readonly refused?: string;
  /** What happened when, in ms from the start of the run (for the timeline picture). */
  readonly timeline: readonly TimelineEvent[];
}

const LOCK_NAME = "invoices";
/** The servers' 2 a.m. timers fire a few ms apart; runner 1's fires first. */
const START_GAP_MS = 30;

/** Plays the invoice story once: three runners, runner 1 frozen past its lease mid-run. */
export async function runVariant(
  variant: Variant,
  settings: ScenarioSettings,
): Promise<VariantResult> {
  checkSettings(settings);
  const { ttlMs, month } = settings;
  // The lock service: one store shared by three coordinators (three servers). Each run uses
  // its own lock name, so variants and repeated runs on a real server never meet.
  const run = randomUUID().slice(0, 8);
  const lockName = `${LOCK_NAME}-${run}`;
  const url = settings.backend ?? `memory://invoice-demo-${run}`;
  const started = performance.now();
  const timeline: TimelineEvent[] = [];
  const at = () => Math.round(performance.now() - started);
  // The demo's audit, a god's-eye view no real runner has: who was granted the lock last.
  // A bill written by anyone else landed after its writer had lost the lease. (Runner names,
  // not tokens, so backends without fencing tokens are audited too.)
  let newestHolder: string | undefined;
  const holderOfToken = new Map<bigint, string>();
  const fence = variant.fenced
    ? new RecordingFence((token) => {
        timeline.push({
          at: at(),
          runner: holderOfToken.get(token) ?? "?",
          kind: "rejected",
          token,
        });
      })
    : undefined;
  let staleAccepted = 0;
  const table = new InvoiceTable({
    onInsert: (invoice) => {
      const stale = invoice.runner !== newestHolder;
      if (stale) staleAccepted++;
      timeline.push({
        at: at(),
        runner: invoice.runner,
        kind: stale ? "stale-write" : "write",
        token: invoice.token,
      });
    },
  });
  const job: InvoiceJob = {
    lockName,
    month,
    clientIds: Array.from({ length: settings.clients }, (_, i) => i + 1),
    billMs: settings.billMs,
    waitMs: 20 * ttlMs,
  };

  // On a real store runner 1 is a process of its own, frozen by a real SIGSTOP (client
  // library and all). On the in-process memory store its freeze is simulated: its clock's
  // timers and its code stop while the store's clock runs on.
  const remote = !url.startsWith("memory:");
  const frozenClock = new PausableClock();
  const names = ["runner 1", "runner 2", "runner 3"];
  const local = remote ? [1, 2] : [0, 1, 2];
  await loadAdapter(url);
  let coordinators: Coordinator[];
  try {
    coordinators = local.map((i) =>
      createCoordinator({
        url,
        ownerId: `runner-${i + 1}`,
        ttlMs,
        clock: i === 0 ? frozenClock : systemClock,
        // Correctness mode raises the fence with every new token before the job starts.
        ...(fence === undefined ? {} : { mode: "correctness" as const, fence }),
      }),
    );
  } catch (error) {
    if (!(error instanceof ConfigError) || error.field !== "mode") throw error;
    return refusedResult(variant, error.message);
  }

  const grants = new FirstGrants();
  const onLockEvent = (runner: string, kind: "acquired" | "released" | "lost", token: bigint) => {
    if (kind === "acquired") {
      newestHolder = runner;
      holderOfToken.set(token, runner);
      grants.granted(runner, token);
    }
    timeline.push({ at: at(), runner, kind, token });
  };
  for (const [k, c] of coordinators.entries()) {
    const runner = names[local[k] as number] as string;
    c.on("acquired", ({ token }) => onLockEvent(runner, "acquired", token));
    c.on("released", ({ token }) => onLockEvent(runner, "released", token));
    c.on("lost", ({ token }) => onLockEvent(runner, "lost", token));
  }

  let pausedAt: number | undefined;
  const record = (kind: "freeze" | "resume") => {
    if (kind === "freeze") pausedAt = performance.now();
    timeline.push({ at: at(), runner: "runner 1", kind });
  };
  const protection = { checkSignal: variant.checkSignal, fence };
  const job1 = { ...job };
  const tasks: (() => Promise<void>)[] = [];
  const stop = new AbortController();
  if (remote) {
    const worker = startRemoteRunner({
      settings: {
        url,
        ttlMs,
        lockName,
        month,
        billMs: settings.billMs,
        waitMs: job.waitMs,
        checkSignal: variant.checkSignal,
        fenced: variant.fenced,
        freezeBeforeBill: settings.freezeBeforeBill,
      },
      table,
      job: job1,
      fence,
      onLockEvent: (kind, token) => onLockEvent("runner 1", kind, token),
      onFreezing: () => {
        record("freeze");
        void wakeAfterTakeover(settings, grants.takeover, () => {
          worker.resume();
          record("resume");
        });
      },
    });
    tasks.push(() => worker.done);
  } else {
    const beforeWrite = freezeBeforeWrite(settings, () => {
      frozenClock.pause(); // SIGSTOP
      record("freeze");
      void wakeAfterTakeover(settings, grants.takeover, () => {
        frozenClock.resume(); // SIGCONT
        record("resume");
      });
      return frozenClock.untilRunning(); // frozen here until SIGCONT
    });
    const c1 = coordinators[0] as Coordinator;
    tasks.push(() =>
      runScheduler(
        {
          name: "runner 1",
          coordinator: c1,
          clock: frozenClock,
          table,
          job,
          protection,
          beforeWrite,
        },
        stop.signal,
      ),
    );
  }
  for (const [k, c] of coordinators.entries()) {
    const i = local[k] as number;
    if (i === 0) continue;
    const runner: Runner = {
      name: names[i] as string,
      coordinator: c,
      clock: systemClock,
      table,
      job,
      protection,
    };
    tasks.push(() => runScheduler(runner, stop.signal));
  }

  try {
    await Promise.all(
      tasks.map(async (task, i) => {
        // Runner 1's timer fires first. A worker process takes a moment to start, so on a
        // real store the other runners wait until it holds the lock (or 5 TTLs at most).
        if (remote && i > 0) {
          const giveUp = new AbortController();
          await Promise.race([
            grants.runner1,
            sleep(systemClock, 5 * ttlMs, giveUp.signal).catch(() => undefined),
          ]);
          giveUp.abort();
        }
        await sleep(systemClock, i * START_GAP_MS);
        await task().catch((error: unknown) => {
          stop.abort(error);
          throw error;
        });
      }),
    );
  } finally {
    frozenClock.resume();
    await Promise.all(coordinators.map((c) => c.close()));
  }

  const takeoverAt = grants.takeoverAt();
  const first1 = grants.first("runner 1");
  return {
    variant: variant.name,
    takeoverMs:
      pausedAt === undefined || takeoverAt === undefined ? null : Math.round(takeoverAt - pausedAt),
    staleAccepted,
    staleRejected: fence?.stats.rejected ?? 0,
    duplicates: table.duplicateClients(month).length,
    runner1Token: first1?.token ?? null,
    runner2Token: grants.takeoverToken(),
    billed: table.billed(month),
    timeline,
  };
}

/** Calls `freeze` just before runner 1 writes bill number `freezeBeforeBill` (its lock check passed). */
function freezeBeforeWrite(
  settings: ScenarioSettings,
  freeze: () => Promise<void>,
): () => Promise<void> {
  let writes = 0;
  return async () => {
    writes++;
    if (writes === settings.freezeBeforeBill) await freeze();
  };
}

/** SIGCONT (`resume`) a little after the takeover, or after 5 TTLs should it never come. */
async function wakeAfterTakeover(
  settings: ScenarioSettings,
  takenOver: Promise<unknown>,
  resume: () => void,
): Promise<void> {
  const giveUp = new AbortController();
  const tooLong = sleep(systemClock, 5 * settings.ttlMs, giveUp.signal).catch(() => undefined);
  await Promise.race([takenOver, tooLong]);
  giveUp.abort();
  await sleep(systemClock, settings.resumeAfterTakeoverMs);
  resume();
}

/** The first grant to each runner, and the takeover: the first grant to runner 2 or 3. */
class FirstGrants {
  readonly #first = new Map<string, { token: bigint; at: number }>();
  #takeover: { token: bigint; at: number } | undefined;
  #resolve: (token: bigint) => void = () => undefined;
  #resolveRunner1: () => void = () => undefined;
  /** Resolves once runner 1 has been granted the lock the first time. */
  readonly runner1 = new Promise<void>((resolve) => {
    this.#resolveRunner1 = resolve;
  });
  /** Resolves with the takeover's token (FIFO stores hand it to runner 2, which queued first). */
  readonly takeover = new Promise<bigint>((resolve) => {
    this.#resolve = resolve;
  });

  granted(runner: string, token: bigint): void {
    const at = performance.now();
    if (!this.#first.has(runner)) this.#first.set(runner, { token, at });
    if (runner === "runner 1") this.#resolveRunner1();
    if (runner !== "runner 1" && this.#takeover === undefined) {
      this.#takeover = { token, at };
      this.#resolve(token);
    }
  }

  first(runner: string): { token: bigint; at: number } | undefined {
    return this.#first.get(runner);
  }

  takeoverAt(): number | undefined {
    return this.#takeover?.at;
  }

  takeoverToken(): bigint | null {
    return this.#takeover?.token ?? null;
  }
}

function refusedResult(variant: Variant, why: string): VariantResult {
  return {
    variant: variant.name,
    takeoverMs: null,
    staleAccepted: 0,
    staleRejected: 0,
    duplicates: 0,
    runner1Token: null,
    runner2Token: null,
    billed: 0,
    refused: why,
    timeline: [],
  };
}

function checkSettings(settings: ScenarioSettings): void {
  const { freezeBeforeBill, clients } = settings;
  if (!Number.isInteger(freezeBeforeBill) || freezeBeforeBill < 1 || freezeBeforeBill > clients) {
    throw new RangeError(`freezeBeforeBill must be 1..${clients}, got ${freezeBeforeBill}`);
  }
}
