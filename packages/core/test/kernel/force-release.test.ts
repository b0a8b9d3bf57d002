import { afterEach, describe, expect, it } from "vitest";
import {
  ConfigError,
  type Coordinator,
  type CoordinatorOptions,
  createCoordinator,
  FORCE_RELEASE_REASON_MAX_LENGTH,
  LockLostError,
  ManualClock,
  MemoryBackend,
  MemoryFence,
  StaleTokenError,
} from "../../src/index.js";
import { expectError, flush, recordEvents, rejectionOf, track } from "../support/helpers.js";
import { wrappedMemory } from "../support/wrapped-memory.js";

const TTL_MS = 3_000;
/** The default renewal interval: a third of the TTL. */
const RENEW_EVERY_MS = TTL_MS / 3;
const REASON = "holder stuck on a dead database connection";

const open: Coordinator[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
});

function world(extra: Partial<CoordinatorOptions> = {}) {
  const clock = new ManualClock();
  const backend = new MemoryBackend({ clock });
  const logged: string[] = [];
  const logger = {
    warn: (message: string) => logged.push(`warn ${message}`),
    error: (message: string) => logged.push(`error ${message}`),
  };
  const coordinator = (ownerId: string) => {
    const c = createCoordinator({
      backend,
      clock,
      ttlMs: TTL_MS,
      ownerId,
      closeBackend: false,
      logger,
      ...extra,
    });
    open.push(c);
    return c;
  };
  return { clock, backend, coordinator, logged };
}

describe("forceRelease() takes a lock from its holder", () => {
  it("the waiter gets the lock at once, with a greater token", async () => {
    const { coordinator } = world();
    const held = await coordinator("a").acquire("invoices");
    const waiting = track(coordinator("b").acquire("invoices"));
    await flush();
    const result = await coordinator("ops").forceRelease("invoices", { reason: REASON });
    expect(result).toEqual({
      name: "invoices",
      released: true,
      space: "lock",
      token: held.token,
      holder: { ownerId: "a" },
      scope: "grant",
    });
    await flush();
    expect(waiting.status).toBe("fulfilled");
    expect(waiting.value?.token).toBeGreaterThan(held.token);
  });

  it("the holder loses it at its next renewal: reason revoked, the operator's reason as detail", async () => {
    const { clock, coordinator, logged } = world();
    const a = coordinator("a");
    const lost = recordEvents(a, ["lost"]).lost;
    const held = await a.acquire("invoices");
    const other = await a.acquire("refunds");
    await coordinator("ops").forceRelease("invoices", { reason: REASON });
    // Within one renewal interval.
    await clock.advance(RENEW_EVERY_MS);
    await flush();
    expect(held.held).toBe(false);
    const reason = expectError(held.signal.reason, LockLostError, {
      reason: "revoked",
      detail: REASON,
      token: held.token,
    });
    expect(reason.message).toContain(REASON);
    expect(lost).toHaveLength(1);
    expect(lost[0]).toMatchObject({ name: "invoices", reason: "revoked" });
    expect(lost[0]?.error.detail).toBe(REASON);
    expect(logged.filter((l) => l.startsWith("error"))).toEqual([
      expect.stringMatching(/lock "invoices" was lost \(revoked\).*holder stuck on a dead/),
    ]);
    // The holder's other locks live on, and it can take the lock again.
    expect(other.held).toBe(true);
    expect(await held.release()).toBe(false);
    const again = await a.acquire("invoices", { waitMs: 0 });
    expect(again.token).toBeGreaterThan(held.token);
  });

  it("the operator's side emits forceReleased and logs who held it and why", async () => {
    const { coordinator, logged } = world();
    const held = await coordinator("a").acquire("invoices", { value: "10.0.0.7" });
    const ops = coordinator("ops");
    const events = recordEvents(ops, ["forceReleased"]).forceReleased;
    await ops.forceRelease("invoices", { reason: REASON });
    expect(events).toEqual([
      { name: "invoices", token: held.token, reason: REASON, released: true },
    ]);
    expect(logged).toContain(
      `warn baton: force-released lock "invoices" (token ${held.token}) held by "a": "${REASON}"`,
    );
  });

  it("in correctness mode the old holder's writes are refused at once, before anyone else takes it", async () => {
    const fence = new MemoryFence();
    const { coordinator } = world({ mode: "correctness", fence });
    const held = await coordinator("a").acquire("invoices");
    await fence.write("invoices", held.token, () => "written");
    await coordinator("ops").forceRelease("invoices", { reason: REASON });
    // The holder has not renewed yet: it still believes it holds the lock.
    expect(held.held).toBe(true);
    const refused = await rejectionOf(fence.write("invoices", held.token, () => "late write"));
    expectError(refused, StaleTokenError, { token: held.token });
    // The next holder's writes go through.
    const next = await coordinator("b").acquire("invoices", { waitMs: 0 });
    expect(await fence.write("invoices", next.token, () => "ok")).toBe("ok");
  });

  it("in correctness mode a read-write lock's write is fenced off too", async () => {
    const fence = new MemoryFence();
    const { coordinator } = world({ mode: "correctness", fence });
    const write = await coordinator("a").readWriteLock("catalog").write();
    const result = await coordinator("ops").forceRelease("catalog", {
      reason: REASON,
      kind: "read-write-lock",
    });
    expect(result).toMatchObject({ released: true, space: "permit", token: write.token });
    expectError(await rejectionOf(fence.write("catalog", write.token, () => 1)), StaleTokenError);
  });

  it("frees one grant of a semaphore; the holder's other permits live on", async () => {
    const { clock, coordinator } = world();
    const exports = coordinator("a").semaphore("exports", { permits: 2 });
    const first = await exports.acquire();
    const second = await exports.acquire();
    const waiting = track(coordinator("b").semaphore("exports", { permits: 2 }).acquire());
    await flush();
    const ops = coordinator("ops");
    expectError(await rejectionOf(ops.forceRelease("exports", { reason: REASON })), ConfigError, {
      field: "token",
    });
    const result = await ops.forceRelease("exports", { reason: REASON, token: first.token });
    expect(result).toMatchObject({ released: true, space: "permit", token: first.token });
    await flush();
    expect(waiting.status).toBe("fulfilled");
    await clock.advance(RENEW_EVERY_MS);
    await flush();
    expectError(first.signal.reason, LockLostError, { reason: "revoked", detail: REASON });
    expect(second.held).toBe(true);
  });

  it("says nothing was freed when nothing holds the name, or a later grant does", async () => {
    const { coordinator } = world();
    const ops = coordinator("ops");
    expect(await ops.forceRelease("invoices", { reason: REASON })).toEqual({
      name: "invoices",
      released: false,
      space: "lock",
      scope: "grant",
    });
    const held = await coordinator("a").acquire("invoices");
    const stale = await ops.forceRelease("invoices", { reason: REASON, token: held.token - 1n });
    expect(stale).toMatchObject({ released: false, token: held.token - 1n });
    expect(held.held).toBe(true);
  });
});

describe("forceRelease() input", () => {
  it("a missing, blank or too long reason, a bad token or kind is a ConfigError naming it", async () => {
    const { coordinator } = world();
    const ops = coordinator("ops");
    const cases: [unknown, string][] = [
      [undefined, "reason"],
      [{}, "reason"],
      [{ reason: "   " }, "reason"],
      [{ reason: "x".repeat(FORCE_RELEASE_REASON_MAX_LENGTH + 1) }, "reason"],
      [{ reason: 42 }, "reason"],
      [{ reason: REASON, token: 3 }, "token"],
      [{ reason: REASON, token: -1n }, "token"],
      [{ reason: REASON, kind: "queue" }, "kind"],
      [{ reason: REASON, signal: "no" }, "signal"],
      [{ reason: REASON, extra: true }, "options.extra"],
    ];
    for (const [options, field] of cases) {
      const error = await rejectionOf(ops.forceRelease("invoices", options as never));
      expectError(error, ConfigError, { field });
    }
    expectError(await rejectionOf(ops.forceRelease("", { reason: REASON })), ConfigError, {
      field: "name",
    });
  });

  it("a backend that does not declare forceRelease: a ConfigError naming the backend", async () => {
    const backend = wrappedMemory("acme", () => ({}));
    const { forceRelease: _, ...guarantees } = backend.guarantees;
    (backend as { guarantees: object }).guarantees = guarantees;
    const ops = createCoordinator({ backend });
    open.push(ops);
    const error = expectError(
      await rejectionOf(ops.forceRelease("invoices", { reason: REASON })),
      ConfigError,
      { field: "backend" },
    );
    expect(error.message).toContain("the acme backend cannot force-release a lock");
  });
});

describe("forceRelease() of a job", () => {
  it("frees the lock of its running slot, and the attempt's signal says why", async () => {
    const { clock, coordinator } = world();
    let signal: AbortSignal | undefined;
    const running = coordinator("a").runOnce(
      "billing",
      "2026-12-01",
      (context) =>
        new Promise<void>((resolve) => {
          signal = context.signal;
          context.signal.addEventListener("abort", () => resolve());
        }),
    );
    await flush();
    const ops = coordinator("ops");
    const result = await ops.forceRelease("billing", { reason: REASON, kind: "job" });
    expect(result).toMatchObject({ name: "billing/slot/2026-12-01", released: true });
    await clock.advance(RENEW_EVERY_MS);
    await flush();
    expectError(signal?.reason, LockLostError, { reason: "revoked", detail: REASON });
    await running;
    expect(await ops.forceRelease("billing", { reason: REASON, kind: "job" })).toMatchObject({
      name: "billing",
      released: false,
    });
  });
});
