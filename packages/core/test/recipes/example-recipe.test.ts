import { LockTimeoutError } from "../../src/contract/errors.js";
import { sleep } from "../../src/helpers/clock.js";
import { checkFunction, checkInt, checkName } from "../../src/helpers/validate.js";
import type { Lock, RecipeHost } from "../../src/kernel/index.js";

/** What `beat` is given, once per interval while this instance holds the lock. */
export interface Beat {
  readonly token: bigint;
  readonly signal: AbortSignal;
}

/** A heartbeat: `beat` runs every `everyMs` on the one instance that holds `name`. */
export interface Heartbeat {
  /** Stops beating and campaigning, and releases the lock if held. */
  stop(): Promise<void>;
}

/**
 * Campaigns for `name` in the background; while this instance holds it, calls `beat` every
 * `everyMs`. A `beat` that throws is reported, and the next one runs on time.
 */
export function heartbeat(
  host: RecipeHost,
  name: string,
  everyMs: number,
  beat: (context: Beat) => void | Promise<void>,
): Heartbeat {
  // Input is checked before any I/O, with the kernel's helpers.
  checkName(name);
  checkInt(everyMs, "everyMs", 1, 3_600_000);
  checkFunction(beat, "beat");
  host.assertOpen();
  const stopping = new AbortController();
  let lock: Lock | undefined;
  const loop = (async () => {
    while (!stopping.signal.aborted) {
      try {
        // The public lock API: wait for the lock, a minute at a time.
        lock = await host.locks.acquire(name, { waitMs: 60_000, signal: stopping.signal });
        while (lock.held && !stopping.signal.aborted) {
          try {
            await beat({ token: lock.token, signal: lock.signal });
          } catch (error) {
            // Nobody awaits a beat: its error is a backgroundError event (and a log line).
            host.report(error, `heartbeat "${name}"`);
          }
          // The coordinator's clock: a test's ManualClock drives the recipe too.
          await sleep(host.clock, everyMs, stopping.signal).catch(() => undefined);
        }
        await lock.release().catch(() => undefined);
      } catch (error) {
        if (stopping.signal.aborted) break;
        if (!(error instanceof LockTimeoutError)) host.report(error, `heartbeat "${name}"`);
        await sleep(host.clock, everyMs, stopping.signal).catch(() => undefined);
      }
    }
  })();
  const stop = async () => {
    stopping.abort(new Error(`heartbeat "${name}" stopped`));
    await lock?.release().catch(() => undefined);
    await loop;
    untrack();
  };
  // The coordinator's close() stops the heartbeat before it releases its locks.
  const untrack = host.track(stop);
  return { stop };
}

import { afterEach, expect, it } from "vitest";
import { type Coordinator, createCoordinator, MemoryBackend } from "../../src/index.js";
import { fakeRecipeHost } from "../support/recipe-host.js";

const open: Coordinator[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
});

/** Resolves once `check()` is true; fails after 10 s. */
async function until(check: () => boolean): Promise<void> {
  for (const started = Date.now(); !check(); ) {
    if (Date.now() - started > 10_000) throw new Error("timed out");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

it("a heartbeat beats on one instance at a time, and another takes over when it stops", async () => {
  const backend = new MemoryBackend();
  const beats: string[] = [];
  const instance = (ownerId: string) => {
    const coordinator = createCoordinator({ backend, ownerId });
    open.push(coordinator);
    return heartbeat(fakeRecipeHost(coordinator), "reports", 20, () => {
      beats.push(ownerId);
    });
  };
  const a = instance("a");
  await until(() => beats.length >= 3);
  const b = instance("b");
  await until(() => beats.length >= 6);
  expect(new Set(beats)).toEqual(new Set(["a"]));
  await a.stop();
  await until(() => beats.includes("b"));
  await b.stop();
});
