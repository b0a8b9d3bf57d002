import type { BackendSession, Grant, LockBackend } from "@baton/core";
import { expect } from "vitest";
import { delay } from "./suite-context.js";

/** A second phase shorter than this says too little: the run is done again. */
const SHORTEST_PHASE_MS = 400;

/** What {@link measureWaiterLooks} counted. */
export interface WaiterLooks {
  /** The waiter's looks per second while one grant held the name. */
  readonly oneGrantPerSecond: number;
  /** The waiter's looks per second while the name changed hands at every short grant. */
  readonly changingHandsPerSecond: number;
  /** How long the second phase lasted, ms (it ends early when the waiter takes the name). */
  readonly changingHandsMs: number;
}

/** Options of {@link measureWaiterLooks}. */
export interface WaiterLooksOptions {
  /** How long each phase lasts, ms. Default 1,500. */
  readonly phaseMs?: number;
  /** How long each short grant of the second phase is held, ms. Default 100. */
  readonly shortHoldMs?: number;
}

/**
 * Counts how often a waiter of another session looks at a held name, on a backend whose every
 * try at a name takes the next number of a token counter that nothing else uses meanwhile (a
 * row-lease table of its own): the gap between two grants' tokens, less one, is the number of
 * tries that came between them. First one grant holds the name for a phase; then the holder
 * releases and takes the name again at once after each short grant, for another phase, so the
 * waiter sees it change hands. The second phase ends early when the waiter takes the name in
 * the moment between a release and the next grant.
 *
 * @example
 * const looks = await measureWaiterLooks(backend, `turns-${randomUUID()}`);
 * console.log(looks.oneGrantPerSecond, looks.changingHandsPerSecond);
 */
export async function measureWaiterLooks(
  backend: LockBackend,
  name: string,
  options: WaiterLooksOptions = {},
): Promise<WaiterLooks> {
  const phaseMs = options.phaseMs ?? 1_500;
  const shortHoldMs = options.shortHoldMs ?? 100;
  const signal = new AbortController().signal;
  const holder = await backend.openSession({ ttlMs: 10_000, ownerId: "looks-holder" });
  const waiter = await backend.openSession({ ttlMs: 10_000, ownerId: "looks-waiter" });
  const stop = new AbortController();
  let waiting: Promise<Grant | null> | undefined;
  try {
    const take = () => holder.acquire(name, { wait: false, signal });
    let grant = await take();
    if (grant === null) throw new Error(`measureWaiterLooks: "${name}" is held already`);
    waiting = waiter.acquire(name, { wait: true, signal: stop.signal }).catch(() => null);
    await delay(phaseMs);
    let next = await handOver(holder, grant, take);
    if (next === null) throw new Error("measureWaiterLooks: the waiter took the name at once");
    const oneGrant = Number(next.token - grant.token - 1n);
    grant = next;
    const started = performance.now();
    let changingHands = 0;
    while (performance.now() - started < phaseMs) {
      await delay(shortHoldMs);
      next = await handOver(holder, grant, take);
      if (next === null) break;
      changingHands += Number(next.token - grant.token - 1n);
      grant = next;
    }
    const changingHandsMs = performance.now() - started;
    if (next !== null) await holder.release(next);
    return {
      oneGrantPerSecond: (oneGrant * 1_000) / phaseMs,
      changingHandsPerSecond: (changingHands * 1_000) / changingHandsMs,
      changingHandsMs,
    };
  } finally {
    stop.abort();
    const won = await waiting;
    if (won) await waiter.release(won).catch(() => undefined);
    await Promise.allSettled([holder.close(), waiter.close()]);
  }
}

/** Releases `grant` and takes its name again at once: the next grant, or `null` if it went. */
async function handOver(
  holder: BackendSession,
  grant: Grant,
  take: () => Promise<Grant | null>,
): Promise<Grant | null> {
  await holder.release(grant);
  return take();
}

/**
 * Asserts what a backend declaring `waiters: "poll-resets"` promises of its waiters, counted by
 * {@link measureWaiterLooks} (so only on a backend whose every try takes a token from a counter
 * of its own): while one grant lasts the waiter's pauses grow (under 15 looks a second over
 * 1.5 s, from a first pause of at most 20 ms), and once it sees the name change hands it looks
 * again within about 50 ms (over twice as many looks a second). A run whose second phase ended
 * within 400 ms (the waiter took the name) is done again, up to five runs.
 *
 * @example
 * await expectLooksSoonAfterChange(new PostgresBackend({ url, schema: "looks" }));
 */
export async function expectLooksSoonAfterChange(backend: LockBackend): Promise<WaiterLooks> {
  for (let run = 1; ; run++) {
    const looks = await measureWaiterLooks(backend, `looks-${run}-${Date.now()}`);
    if (looks.changingHandsMs < SHORTEST_PHASE_MS && run < 5) continue;
    const seen = `looks a second: ${looks.oneGrantPerSecond.toFixed(1)} under one grant, ${looks.changingHandsPerSecond.toFixed(1)} while the name changed hands (${Math.round(looks.changingHandsMs)} ms)`;
    expect(looks.changingHandsMs, seen).toBeGreaterThanOrEqual(SHORTEST_PHASE_MS);
    expect(looks.oneGrantPerSecond, seen).toBeLessThan(15);
    expect(looks.changingHandsPerSecond, seen).toBeGreaterThan(2 * looks.oneGrantPerSecond);
    return looks;
  }
}
