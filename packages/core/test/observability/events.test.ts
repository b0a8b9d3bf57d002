import { on, once } from "node:events";
import { describe, expect, it } from "vitest";
import {
  type CoordinatorEvents,
  createCoordinator,
  LockLostError,
  type Logger,
  ManualClock,
  SessionLostError,
} from "../../src/index.js";
import { failOnUnhandledRejections, recordEvents, setup } from "../support/helpers.js";
import { ScriptedBackend } from "../support/scripted-backend.js";

failOnUnhandledRejections();

describe("coordinator events", () => {
  it("acquired, released and lost carry the name, token and details", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 1_000 });
    const events = recordEvents(coordinator, ["acquired", "released", "lost", "sessionOpened"]);
    await clock.advance(50);
    const a = await coordinator.acquire("a", { waitMs: 0 });
    expect(events.sessionOpened).toEqual([{ ownerId: coordinator.ownerId, ttlMs: 1_000 }]);
    expect(events.acquired).toEqual([
      { name: "a", token: a.token, waitedMs: 0, attempts: 1, lock: a },
    ]);

    await a.release();
    expect(events.released).toEqual([{ name: "a", token: a.token, wasHeld: true, lock: a }]);
    expect(events.lost).toEqual([]); // a release is not a loss

    const b = await coordinator.acquire("b", { waitMs: 0 });
    backend.lastSession.loseNow(new SessionLostError("gone"));
    expect(events.lost).toHaveLength(1);
    const lost = events.lost[0];
    expect(lost).toMatchObject({ name: "b", token: b.token, reason: "session-lost" });
    expect(lost?.lock).toBe(b);
    expect(lost?.error).toBeInstanceOf(LockLostError);
    expect(lost?.error).toBe(b.signal.reason);

    await b.release();
    expect(events.released.at(-1)).toEqual({ name: "b", token: b.token, wasHeld: false, lock: b });
  });

  it("on() returns an unsubscribe function", async () => {
    const { coordinator } = setup();
    const seen: string[] = [];
    const off = coordinator.on("acquired", (e) => seen.push(e.name));
    await coordinator.acquire("a", { waitMs: 0 });
    off();
    await coordinator.acquire("b", { waitMs: 0 });
    expect(seen).toEqual(["a"]);
  });

  it("a listener that throws breaks neither acquire nor renewal, and is reported to the logger", async () => {
    const clock = new ManualClock();
    const errors: string[] = [];
    const logger: Logger = { error: (message) => errors.push(message), warn: () => undefined };
    const coordinator = createCoordinator({
      backend: new ScriptedBackend({ clock }),
      clock,
      ttlMs: 1_000,
      logger,
    });
    coordinator.on("acquired", () => {
      throw new Error("metrics exporter down");
    });
    coordinator.on("renewed", () => {
      throw new Error("metrics exporter down");
    });
    const lived: string[] = [];
    coordinator.on("acquired", (e) => lived.push(e.name)); // later listeners still run

    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    expect(lived).toEqual(["jobs"]);
    await clock.advance(10_000);
    expect(lock.held).toBe(true);
    expect(errors.some((m) => m.includes('"acquired"'))).toBe(true);
    expect(errors.filter((m) => m.includes('"renewed"')).length).toBeGreaterThan(20);
  });

  it("a logger that throws does not stop renewal retries", async () => {
    const clock = new ManualClock();
    const backend = new ScriptedBackend({ clock });
    const logger: Logger = {
      warn: () => {
        throw new Error("log sink full");
      },
      error: () => {
        throw new Error("log sink full");
      },
    };
    const coordinator = createCoordinator({ backend, clock, ttlMs: 1_000, logger });
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    let failures = 1;
    backend.hooks.keepAlive = async (_session, next) => {
      if (failures-- > 0) throw new Error("blip");
      return await next();
    };
    await clock.advance(5_000);
    expect(lock.held).toBe(true);
  });
});

describe("coordinator events, EventEmitter and EventTarget style", () => {
  it("events.once(coordinator, name) from node:events resolves with the next payload", async () => {
    const { coordinator } = setup();
    const next = once(coordinator, "acquired");
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    const [payload] = (await next) as [CoordinatorEvents["acquired"]];
    expect(payload).toMatchObject({ name: "jobs", token: lock.token });
  });

  it("events.once with a signal that aborts rejects and leaves no listener behind", async () => {
    const { coordinator } = setup();
    const controller = new AbortController();
    const next = once(coordinator, "acquired", { signal: controller.signal });
    controller.abort();
    await expect(next).rejects.toMatchObject({ name: "AbortError" });
    const seen: string[] = [];
    coordinator.on("acquired", (e) => seen.push(e.name));
    await coordinator.acquire("a", { waitMs: 0 });
    expect(seen).toEqual(["a"]);
  });

  it("once() runs a listener for one event; off() removes on and once listeners", async () => {
    const { coordinator } = setup();
    const onceSeen: string[] = [];
    const removedSeen: string[] = [];
    const onSeen: string[] = [];
    const removed = (e: CoordinatorEvents["acquired"]) => removedSeen.push(e.name);
    const removedOnce = (e: CoordinatorEvents["acquired"]) => removedSeen.push(`once ${e.name}`);
    const listener = (e: CoordinatorEvents["acquired"]) => onSeen.push(e.name);
    coordinator
      .once("acquired", (e) => onceSeen.push(e.name))
      .once("acquired", removedOnce)
      .off("acquired", removedOnce);
    coordinator.on("acquired", removed);
    coordinator.on("acquired", listener);
    coordinator.removeListener("acquired", removed);
    await coordinator.acquire("a", { waitMs: 0 });
    await coordinator.acquire("b", { waitMs: 0 });
    coordinator.off("acquired", listener);
    await coordinator.acquire("c", { waitMs: 0 });
    expect(onceSeen).toEqual(["a"]);
    expect(onSeen).toEqual(["a", "b"]);
    expect(removedSeen).toEqual([]);
  });

  it("events.on(coordinator, name) iterates the payloads", async () => {
    const { coordinator } = setup();
    const controller = new AbortController();
    const names: string[] = [];
    const reading = (async () => {
      for await (const [payload] of on(coordinator, "acquired", { signal: controller.signal })) {
        names.push((payload as CoordinatorEvents["acquired"]).name);
        if (names.length === 2) controller.abort();
      }
    })().catch((error: unknown) => error);
    await coordinator.acquire("a", { waitMs: 0 });
    await coordinator.acquire("b", { waitMs: 0 });
    expect(await reading).toMatchObject({ name: "AbortError" });
    expect(names).toEqual(["a", "b"]);
  });

  it("addEventListener delivers a CustomEvent with the payload, honouring once and signal", async () => {
    const { coordinator } = setup();
    const details: string[] = [];
    const onceDetails: string[] = [];
    const controller = new AbortController();
    coordinator.addEventListener(
      "acquired",
      (event) => details.push((event as CustomEvent<CoordinatorEvents["acquired"]>).detail.name),
      { signal: controller.signal },
    );
    coordinator.addEventListener(
      "acquired",
      {
        handleEvent: (event) =>
          onceDetails.push((event as CustomEvent<CoordinatorEvents["acquired"]>).detail.name),
      },
      { once: true },
    );
    await coordinator.acquire("a", { waitMs: 0 });
    controller.abort();
    await coordinator.acquire("b", { waitMs: 0 });
    expect(details).toEqual(["a"]);
    expect(onceDetails).toEqual(["a"]);
    expect(() => coordinator.dispatchEvent(new Event("acquired"))).toThrow(TypeError);
  });
});

/**
 * A logger shaped like pino's: `(obj, msg)` or `(msg)`; like pino, it drops arguments after a
 * message that has no `%` placeholder for them.
 */
function pinoLike() {
  const lines: { level: string; fields: Record<string, unknown>; msg: string }[] = [];
  const at =
    (level: string) =>
    (first: unknown, ...rest: unknown[]): void => {
      if (typeof first === "string") lines.push({ level, fields: {}, msg: first });
      else lines.push({ level, fields: first as Record<string, unknown>, msg: String(rest[0]) });
    };
  const logger = {
    warn: at("warn"),
    error: at("error"),
    debug: at("debug"),
    bindings: () => ({}),
    child: () => logger,
  };
  return { lines, logger };
}

describe("the logger gets the error in the shape it reads", () => {
  it("a pino-shaped logger gets (obj, msg) with the error under err", async () => {
    const clock = new ManualClock();
    const backend = new ScriptedBackend({ clock });
    const { lines, logger } = pinoLike();
    const coordinator = createCoordinator({ backend, clock, ttlMs: 1_000, logger });
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    const blip = new Error("store blip");
    let failures = 1;
    backend.hooks.keepAlive = async (_session, next) => {
      if (failures-- > 0) throw blip;
      return await next();
    };
    await clock.advance(1_000);
    expect(lock.held).toBe(true);
    const renewal = lines.find((l) => l.msg.includes("renewal failed"));
    expect(renewal?.level).toBe("warn");
    expect(renewal?.fields.err).toBe(blip);
  });

  it("a console-shaped logger gets (msg, error)", async () => {
    const clock = new ManualClock();
    const backend = new ScriptedBackend({ clock });
    const lines: unknown[][] = [];
    const logger: Logger = {
      warn: (...args: unknown[]) => {
        lines.push(args);
      },
    };
    const coordinator = createCoordinator({ backend, clock, ttlMs: 1_000, logger });
    await coordinator.acquire("jobs", { waitMs: 0 });
    const blip = new Error("store blip");
    let failures = 1;
    backend.hooks.keepAlive = async (_session, next) => {
      if (failures-- > 0) throw blip;
      return await next();
    };
    await clock.advance(1_000);
    const renewal = lines.find((args) => String(args[0]).includes("renewal failed"));
    expect(renewal).toEqual([expect.stringContaining("renewal failed"), blip]);
  });
});
