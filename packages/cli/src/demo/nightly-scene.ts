import { randomUUID } from "node:crypto";
import {
  ConfigError,
  type Coordinator,
  createCoordinator,
  type RunOnceResult,
  type Schedule,
  sleep,
  systemClock,
} from "@baton/core";
import { loadAdapter } from "../load-adapter.js";

/** How the replicas guard the nightly job: a row of the scene's table. */
export type NightlyGuard = "lock only" | "runOnce";

/** The knobs of the nightly scene. */
export interface NightlySettings {
  /** Clients billed each night. */
  readonly clients: number;
  /**
   * How far behind replica 1's clock each replica's clock runs, in ms: their 02:00 timers fire
   * that much later. One entry per replica, the first 0.
   */
  readonly clockOffsetsMs: readonly number[];
  /** How long one run of the billing takes, in ms, all clients included. */
  readonly runMs: number;
  /** The night, as `YYYY-MM-DD`: the job runs at 02:00 UTC of that day. */
  readonly night: string;
  /** Lease length of every replica's locks, in ms. */
  readonly ttlMs: number;
  /** The store (default `memory://` with a store of the scene's own). */
  readonly backend?: string;
}

/** What one guard did in the scene. */
export interface NightlyResult {
  readonly guard: NightlyGuard;
  /** What each replica did when its timer fired, in replica order. */
  readonly replicas: readonly string[];
  /** Invoices sent, duplicates included. */
  readonly invoices: number;
  /** Clients sent exactly one invoice. */
  readonly billedOnce: number;
  /** Clients sent more than one invoice. */
  readonly billedTwice: number;
  /** Clients sent none. */
  readonly unbilled: number;
  /** The slot the replicas agreed on (`runOnce`), e.g. `2026-12-01T02:00:00Z`. */
  readonly slot?: string;
  /** Why the guard could not run on this backend, if it could not. */
  readonly refused?: string;
}

const CRON = "0 2 * * *";
/** Replica 1's clock shows this long before 02:00 when the scene starts. */
const LEAD_MS = 300;
/** Clients billed per step of the run (a step takes its share of `runMs`). */
const BATCH = 50;
/** A scene that has not ended by then is broken: it fails instead of hanging. */
const SCENE_LIMIT_MS = 30_000;

/**
 * The nightly billing with one guard: three replicas (coordinators on one store) whose clocks
 * are seconds apart run the same 02:00 job on their own timers. The wall clock of the scene
 * is compressed: it starts just before 02:00 on replica 1's clock.
 */
export async function runNightlyScene(
  guard: NightlyGuard,
  settings: NightlySettings,
): Promise<NightlyResult> {
  const run = randomUUID().slice(0, 8);
  const url = settings.backend ?? `memory://nightly-demo-${run}`;
  const job = `billing-${run}`;
  const sent = new Map<number, number>();
  const bill = async (signal?: AbortSignal) => {
    for (let first = 1; first <= settings.clients; first += BATCH) {
      const last = Math.min(settings.clients, first + BATCH - 1);
      await sleep(systemClock, (settings.runMs * (last - first + 1)) / settings.clients, signal);
      for (let client = first; client <= last; client++) {
        sent.set(client, (sent.get(client) ?? 0) + 1);
      }
    }
  };
  const nightAt = Date.parse(`${settings.night}T02:00:00Z`);
  const startedAt = performance.now();
  /** Each replica's wall clock: 02:00 comes `offset` ms later on it than on replica 1's. */
  const clockOf = (offset: number) => () =>
    nightAt - LEAD_MS - offset + (performance.now() - startedAt);

  await loadAdapter(url);
  const coordinators = settings.clockOffsetsMs.map((_, i) =>
    createCoordinator({ url, ttlMs: settings.ttlMs, ownerId: `replica-${i + 1}` }),
  );
  try {
    const outcome =
      guard === "lock only"
        ? await withLockOnly(coordinators, settings, clockOf, nightAt, job, bill)
        : await withRunOnce(coordinators, settings, clockOf, job, bill);
    if ("refused" in outcome) return refusedResult(guard, settings, outcome.refused);
    const counts = Array.from({ length: settings.clients }, (_, i) => sent.get(i + 1) ?? 0);
    return {
      guard,
      replicas: outcome.replicas,
      invoices: counts.reduce((a, b) => a + b, 0),
      billedOnce: counts.filter((n) => n === 1).length,
      billedTwice: counts.filter((n) => n > 1).length,
      unbilled: counts.filter((n) => n === 0).length,
      ...(outcome.slot === undefined ? {} : { slot: outcome.slot }),
    };
  } finally {
    await Promise.all(coordinators.map((c) => c.close().catch(() => undefined)));
  }
}

type SceneOutcome =
  | { readonly replicas: readonly string[]; readonly slot?: string }
  | { readonly refused: string };

/**
 * The usual guard: each replica's timer takes the job's lock if it is free (skipping the
 * night if another replica holds it), runs the billing and releases the lock.
 */
async function withLockOnly(
  coordinators: readonly Coordinator[],
  settings: NightlySettings,
  clockOf: (offset: number) => () => number,
  nightAt: number,
  job: string,
  bill: () => Promise<void>,
): Promise<SceneOutcome> {
  const replicas = await Promise.all(
    coordinators.map(async (coordinator, i) => {
      const now = clockOf(settings.clockOffsetsMs[i] ?? 0);
      await sleep(systemClock, Math.max(0, nightAt - now())); // this replica's 02:00 timer
      const lock = await coordinator.tryAcquire(`${job}/${settings.night}`);
      if (lock === null) return "skipped: held";
      try {
        await bill();
      } finally {
        await lock.release();
      }
      return "ran";
    }),
  );
  return { replicas };
}

/**
 * Baton's guard: each replica schedules the job with `coordinator.schedule`; the tick names
 * the slot, and the slot's record says it is done.
 */
async function withRunOnce(
  coordinators: readonly Coordinator[],
  settings: NightlySettings,
  clockOf: (offset: number) => () => number,
  job: string,
  bill: (signal: AbortSignal) => Promise<void>,
): Promise<SceneOutcome> {
  const limit = new AbortController();
  const tooLong = setTimeout(
    () => limit.abort(new Error(`the nightly scene did not end within ${SCENE_LIMIT_MS} ms`)),
    SCENE_LIMIT_MS,
  );
  const schedules: Schedule[] = [];
  try {
    const results = await Promise.all(
      coordinators.map(
        (coordinator, i) =>
          new Promise<{ result: RunOnceResult<void>; slot: string } | { refused: string }>(
            (resolve, reject) => {
              limit.signal.addEventListener("abort", () => reject(limit.signal.reason), {
                once: true,
              });
              coordinator.on("backgroundError", ({ error, during }) => {
                // A backend that keeps no records: runOnce cannot remember a slot is done.
                if (error instanceof ConfigError) resolve({ refused: error.message });
                // The night's slot failed here before it could run (the store did not answer):
                // the schedule would wait for the next night, so the scene ends with the error.
                else if (during.startsWith(`schedule "${job}"`)) reject(error);
              });
              try {
                schedules.push(
                  coordinator.schedule(CRON, job, ({ signal }) => bill(signal), {
                    now: clockOf(settings.clockOffsetsMs[i] ?? 0),
                    atMostMs: 10 * settings.runMs + 10 * settings.ttlMs,
                    onResult: (result, slot) => resolve({ result, slot }),
                  }),
                );
              } catch (error) {
                // A backend known to keep no records is refused when the schedule is made.
                if (error instanceof ConfigError) resolve({ refused: error.message });
                else reject(error);
              }
            },
          ),
      ),
    );
    const refused = results.find((r) => "refused" in r);
    if (refused !== undefined && "refused" in refused) return { refused: refused.refused };
    const ran = results.flatMap((r) => ("result" in r ? [r] : []));
    return {
      replicas: ran.map(({ result }) => labelOf(result)),
      ...(ran[0] === undefined ? {} : { slot: ran[0].slot }),
    };
  } finally {
    clearTimeout(tooLong);
    await Promise.all(schedules.map((s) => s.stop()));
  }
}

function labelOf(result: RunOnceResult<void>): string {
  switch (result.outcome) {
    case "ran":
      return "ran";
    case "already-done":
      return "skipped: done";
    case "running-elsewhere":
      return "skipped: running";
    case "failed":
      return "failed";
    case "attempts-exhausted":
      return "skipped: failed";
  }
}

function refusedResult(guard: NightlyGuard, settings: NightlySettings, why: string): NightlyResult {
  return {
    guard,
    replicas: settings.clockOffsetsMs.map(() => "-"),
    invoices: 0,
    billedOnce: 0,
    billedTwice: 0,
    unbilled: settings.clients,
    refused: why,
  };
}
