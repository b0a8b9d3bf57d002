import { LockTimeoutError } from "@baton/core";
import { describe, expect, it } from "vitest";
import { delay, type SuiteContext, settle } from "../suite-context.js";

/** Waits sharing one signal (a service's shutdown signal, say). */
const SHARED_WAITS = 24;

/** Collects the `MaxListenersExceededWarning`s Node emits while `run` runs. */
async function listenerWarnings(run: () => Promise<void>): Promise<string[]> {
  const seen: string[] = [];
  const onWarning = (warning: Error) => {
    if (warning.name === "MaxListenersExceededWarning") seen.push(warning.message);
  };
  process.on("warning", onWarning);
  try {
    await run();
    // Node emits warnings on a later tick.
    await delay(50);
  } finally {
    process.off("warning", onWarning);
  }
  return seen;
}

/** A cancelled or timed-out wait leaves nothing behind that would delay later acquirers. */
export function cancellationGroup(ctx: SuiteContext): void {
  describe("cancellation", () => {
    it("an aborted wait rejects with the signal's reason and leaves nothing behind", async () => {
      const name = ctx.name("cancel");
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const c = ctx.coordinator();
      const held = await a.acquire(name);
      const controller = new AbortController();
      const waiting = settle(b.acquire(name, { waitMs: 60_000, signal: controller.signal }));
      await delay(300);
      const reason = new Error("caller gave up");
      controller.abort(reason);
      const outcome = await waiting;
      expect(outcome.ok).toBe(false);
      if (!outcome.ok) expect(outcome.error).toBe(reason);
      await delay(100);
      await held.release();
      const next = await c.tryAcquire(name);
      expect(next).not.toBeNull();
      expect(await c.holder(name)).toMatchObject({ ownerId: c.ownerId });
    });

    it("a wait that runs out rejects with LockTimeoutError and leaves nothing behind", async () => {
      const name = ctx.name("timeout");
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const c = ctx.coordinator();
      const held = await a.acquire(name);
      const started = performance.now();
      const error = await b.acquire(name, { waitMs: 500 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockTimeoutError);
      expect((error as LockTimeoutError).waitMs).toBe(500);
      expect(performance.now() - started).toBeGreaterThanOrEqual(450);
      await held.release();
      expect(await c.tryAcquire(name)).not.toBeNull();
    });

    it("many waits sharing one signal add no listener each to it (no MaxListenersExceededWarning)", async () => {
      const names = Array.from({ length: SHARED_WAITS }, () => ctx.name("shared-signal"));
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const held = await Promise.all(names.map((name) => a.acquire(name)));
      const shutdown = new AbortController();
      const reason = new Error("shutting down");
      const warnings = await listenerWarnings(async () => {
        const waits = names.map((name) =>
          settle(b.acquire(name, { waitMs: 60_000, signal: shutdown.signal })),
        );
        await delay(300);
        shutdown.abort(reason);
        const outcomes = await Promise.all(waits);
        expect(outcomes.every((o) => !o.ok && o.error === reason)).toBe(true);
      });
      expect(warnings).toEqual([]);
      await Promise.all(held.map((lock) => lock.release()));
    });

    it("many waits of one raw session sharing one signal print no MaxListenersExceededWarning", async () => {
      const names = Array.from({ length: SHARED_WAITS }, () => ctx.name("shared-raw"));
      const a = ctx.coordinator();
      const held = await Promise.all(names.map((name) => a.acquire(name)));
      const session = await ctx.session();
      const shutdown = new AbortController();
      const reason = new Error("shutting down");
      const warnings = await listenerWarnings(async () => {
        const waits = names.map((name) =>
          settle(session.acquire(name, { wait: true, signal: shutdown.signal })),
        );
        // Well within the session's TTL: nothing renews a raw session.
        await delay(Math.min(300, ctx.target.ttlMs / 3));
        shutdown.abort(reason);
        const outcomes = await Promise.all(waits);
        expect(outcomes.every((o) => !o.ok && o.error === reason)).toBe(true);
      });
      expect(warnings).toEqual([]);
      await Promise.all(held.map((lock) => lock.release()));
    });

    it("an already-aborted signal rejects at once without taking the lock", async () => {
      const name = ctx.name("pre-aborted");
      const a = ctx.coordinator();
      const reason = new Error("already cancelled");
      const error = await a
        .acquire(name, { signal: AbortSignal.abort(reason) })
        .catch((e: unknown) => e);
      expect(error).toBe(reason);
      const b = ctx.coordinator();
      expect(await b.tryAcquire(name)).not.toBeNull();
    });
  });
}
