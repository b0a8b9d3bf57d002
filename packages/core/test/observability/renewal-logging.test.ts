import { describe, expect, it } from "vitest";
import { createCoordinator, ManualClock } from "../../src/index.js";
import { failOnUnhandledRejections, flush } from "../support/helpers.js";
import { ScriptedBackend } from "../support/scripted-backend.js";

failOnUnhandledRejections();

function loggerSpy() {
  const lines: { level: string; message: string; details: unknown }[] = [];
  const at = (level: string) => (message: string, details?: unknown) => {
    lines.push({ level, message, details });
  };
  return { lines, logger: { debug: at("debug"), warn: at("warn"), error: at("error") } };
}

function setupLogged(ttlMs: number, renewEveryMs?: number) {
  const clock = new ManualClock();
  const backend = new ScriptedBackend({ clock });
  const { lines, logger } = loggerSpy();
  const coordinator = createCoordinator({
    backend,
    clock,
    ttlMs,
    logger,
    ...(renewEveryMs === undefined ? {} : { renewEveryMs }),
  });
  let failures = 0;
  const fail = (on: boolean) => {
    backend.hooks.keepAlive = on
      ? async () => {
          failures++;
          throw new Error("Stream isn't writeable");
        }
      : undefined;
  };
  return { clock, coordinator, lines, fail, failures: () => failures };
}

describe("renewal failures reach the logger summarised", () => {
  it("a short outage logs its first failure and its recovery, not every retry", async () => {
    const { clock, coordinator, lines, fail, failures } = setupLogged(3_000);
    const lock = await coordinator.acquire("report");
    await clock.advance(1_000);
    fail(true);
    await clock.advance(2_500);
    fail(false);
    await clock.advance(1_000);
    expect(lock.held).toBe(true);
    expect(failures()).toBeGreaterThanOrEqual(3);
    expect(lines.map((l) => l.message)).toEqual([
      expect.stringMatching(/^baton: renewal failed, \d+ ms left before the local deadline$/),
      expect.stringMatching(
        new RegExp(`^baton: renewal succeeded again after ${failures()} failed in a row over`),
      ),
    ]);
  });

  it("a long outage logs one summary line with a count per 5 s", async () => {
    const { clock, coordinator, lines, fail, failures } = setupLogged(30_000, 300);
    const lock = await coordinator.acquire("report");
    fail(true);
    await clock.advance(12_000);
    fail(false);
    await clock.advance(1_000);
    expect(lock.held).toBe(true);
    expect(failures()).toBeGreaterThan(40);
    const messages = lines.map((l) => l.message);
    expect(messages).toHaveLength(4);
    expect(messages[0]).toMatch(/^baton: renewal failed, /);
    const counted = messages
      .slice(1, 3)
      .map((m) => Number(/failed (\d+) more times in the last \d+ ms/.exec(m ?? "")?.[1]));
    expect(counted.every((n) => n > 10)).toBe(true);
    expect(messages[3]).toMatch(/^baton: renewal succeeded again after \d+ failed in a row/);
    // Every failure is in a line: the first, the summaries, and the rest in the recovery.
    expect(1 + (counted[0] ?? 0) + (counted[1] ?? 0)).toBeLessThanOrEqual(failures());
  });

  it("the loss of locks is logged once, as an error naming them", async () => {
    const { clock, coordinator, lines, fail } = setupLogged(1_000);
    const a = await coordinator.acquire("a");
    const b = await coordinator.acquire("b");
    fail(true);
    await clock.advance(1_500);
    await flush();
    expect([a.held, b.held]).toEqual([false, false]);
    const errors = lines.filter((l) => l.level === "error");
    expect(errors.map((l) => l.message)).toEqual([
      expect.stringMatching(/^baton: 2 locks \("a", "b"\) were lost \(deadline\): /),
    ]);
    // A lock lost on its own (not closed by close()) gets its own line; close() logs none.
    fail(false);
    const c = await coordinator.acquire("c");
    await coordinator.close();
    expect(c.held).toBe(false);
    expect(lines.filter((l) => l.level === "error")).toHaveLength(1);
  });
});
