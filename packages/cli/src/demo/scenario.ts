import { randomUUID } from "node:crypto";
import {
  type Clock,
  ConfigError,
  type Coordinator,
  createCoordinator,
  MemoryFence,
  sleep,
  systemClock,
} from "@baton/core";
import { InvoiceTable } from "./invoice-table.js";
import { PausableClock } from "./pausable-clock.js";
import { type InvoiceJob, type Runner, runScheduler } from "./runner.js";

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
  /** Runner 2's first token (the takeover). */
  readonly runner2Token: bigint | null;
  /** Clients with an invoice at the end (all of them, in every variant). */
  readonly billed: number;
  /** Why the variant did not run (correctness mode refused the backend), if it did not. */
  readonly refused?: string;
}

const LOCK_NAME = "invoices";
/** The servers' 2 a.m. timers fire a few ms apart; runner 1's fires first. */
const START_GAP_MS = 30;

/** Plays seed 002's story once: three runners, runner 1 frozen past its lease mid-run. */
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
  const fence = variant.fenced ? new MemoryFence() : undefined;
  // The demo's audit, a god's-eye view no real runner has: the newest token granted so far.
  // A write carrying an older token landed after its writer had lost the lease.
  let newestGrant = 0n;
  let staleAccepted = 0;
  const table = new InvoiceTable({
    onInsert: (invoice) => {
      if (invoice.token < newestGrant) staleAccepted++;
    },
  });
  const job: InvoiceJob = {
    lockName,
    month,
    clientIds: Array.from({ length: settings.clients }, (_, i) => i + 1),
    billMs: settings.billMs,
    waitMs: 20 * ttlMs,
  };

  const frozenClock = new PausableClock(); // runner 1's process, the one that will freeze
  let coordinators: Coordinator[];
  try {
    coordinators = [frozenClock, systemClock, systemClock].map((clock, i) =>
      createCoordinator({
        url,
        ownerId: `runner-${i + 1}`,
        ttlMs,
        clock,
        // Correctness mode raises the fence with every new token before the job starts.
        ...(fence === undefined ? {} : { mode: "correctness" as const, fence }),
      }),
    );
  } catch (error) {
    if (!(error instanceof ConfigError) || error.field !== "mode") throw error;
    return refusedResult(variant, error.message);
  }
  for (const c of coordinators) {
    c.on("acquired", ({ token }) => {
      if (token > newestGrant) newestGrant = token;
    });
  }
  const [c1, c2, c3] = coordinators as [Coordinator, Coordinator, Coordinator];
  const first1 = firstToken(c1);
  const first2 = firstToken(c2);

  const freeze = freezeBeforeWrite(frozenClock, settings, first2.promise);
  const protection = { checkSignal: variant.checkSignal, fence };
  const runner = (name: string, coordinator: Coordinator, clock: Clock): Runner => ({
    name,
    coordinator,
    clock,
    table,
    job,
    protection,
  });
  const runners: Runner[] = [
    { ...runner("runner 1", c1, frozenClock), beforeWrite: freeze.beforeWrite },
    runner("runner 2", c2, systemClock),
    runner("runner 3", c3, systemClock),
  ];

  const stop = new AbortController();
  try {
    await Promise.all(
      runners.map(async (r, i) => {
        await sleep(systemClock, i * START_GAP_MS);
        await runScheduler(r, stop.signal).catch((error: unknown) => {
          stop.abort(error);
          throw error;
        });
      }),
    );
  } finally {
    frozenClock.resume();
    await Promise.all(coordinators.map((c) => c.close()));
  }

  const pausedAt = freeze.pausedAt();
  const takeoverAt = first2.at();
  return {
    variant: variant.name,
    takeoverMs:
      pausedAt === undefined || takeoverAt === undefined ? null : Math.round(takeoverAt - pausedAt),
    staleAccepted,
    staleRejected: fence?.stats.rejected ?? 0,
    duplicates: table.duplicateClients(month).length,
    runner1Token: first1.token(),
    runner2Token: first2.token(),
    billed: table.billed(month),
  };
}

/**
 * The operator's SIGSTOP and SIGCONT, in one process: runner 1 freezes just before writing bill
 * number `freezeBeforeBill` (its lock check already passed), and wakes a little after runner 2
 * took over (or after 5 TTLs, should runner 2 never manage to).
 */
function freezeBeforeWrite(
  clock: PausableClock,
  settings: ScenarioSettings,
  takenOver: Promise<unknown>,
): { beforeWrite: () => Promise<void>; pausedAt: () => number | undefined } {
  let writes = 0;
  let pausedAt: number | undefined;
  const beforeWrite = async (): Promise<void> => {
    writes++;
    if (writes !== settings.freezeBeforeBill) return;
    pausedAt = performance.now();
    clock.pause(); // SIGSTOP
    void wakeAfterTakeover(clock, settings, takenOver);
    await clock.untilRunning(); // frozen here until SIGCONT
  };
  return { beforeWrite, pausedAt: () => pausedAt };
}

/** SIGCONT a little after runner 2 took over, or after 5 TTLs should it never take over. */
async function wakeAfterTakeover(
  clock: PausableClock,
  settings: ScenarioSettings,
  takenOver: Promise<unknown>,
): Promise<void> {
  const giveUp = new AbortController();
  const tooLong = sleep(systemClock, 5 * settings.ttlMs, giveUp.signal).catch(() => undefined);
  await Promise.race([takenOver, tooLong]);
  giveUp.abort();
  await sleep(systemClock, settings.resumeAfterTakeoverMs);
  clock.resume();
}

/** The first token `coordinator` is granted, when, and a promise of it. */
function firstToken(coordinator: Coordinator): {
  promise: Promise<bigint>;
  token: () => bigint | null;
  at: () => number | undefined;
} {
  let token: bigint | null = null;
  let at: number | undefined;
  const promise = new Promise<bigint>((resolve) => {
    const off = coordinator.on("acquired", (event) => {
      off();
      token = event.token;
      at = performance.now();
      resolve(event.token);
    });
  });
  return { promise, token: () => token, at: () => at };
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
  };
}

function checkSettings(settings: ScenarioSettings): void {
  const { freezeBeforeBill, clients } = settings;
  if (!Number.isInteger(freezeBeforeBill) || freezeBeforeBill < 1 || freezeBeforeBill > clients) {
    throw new RangeError(`freezeBeforeBill must be 1..${clients}, got ${freezeBeforeBill}`);
  }
}
