import { afterEach, beforeEach, expect } from "vitest";
import {
  ConfigError,
  type Coordinator,
  type CoordinatorEventName,
  type CoordinatorEvents,
  type CoordinatorOptions,
  createCoordinator,
  ManualClock,
} from "../../src/index.js";
import { ScriptedBackend, type ScriptedBackendOptions } from "./scripted-backend.js";

/** A promise's state, readable without awaiting it (and without leaving it unhandled). */
export interface Tracked<T> {
  readonly status: "pending" | "fulfilled" | "rejected";
  readonly value: T | undefined;
  readonly error: unknown;
  readonly promise: Promise<T>;
}

/** Tracks `promise`; a rejection is recorded, never left unhandled. */
export function track<T>(promise: Promise<T>): Tracked<T> {
  const state: { -readonly [K in keyof Tracked<T>]: Tracked<T>[K] } = {
    status: "pending",
    value: undefined,
    error: undefined,
    promise,
  };
  promise.then(
    (value) => {
      state.status = "fulfilled";
      state.value = value;
    },
    (error: unknown) => {
      state.status = "rejected";
      state.error = error;
    },
  );
  return state;
}

/** Lets pending promise chains and immediates run. */
export async function flush(turns = 10): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** Advances `clock` to the absolute time `t`. */
export async function advanceTo(clock: ManualClock, t: number): Promise<void> {
  const ms = t - clock.now();
  if (ms < 0) throw new Error(`advanceTo(${t}) is in the past (now ${clock.now()})`);
  await clock.advance(ms);
}

/** Records every payload of the given events. */
export function recordEvents<E extends CoordinatorEventName>(
  coordinator: Coordinator,
  names: readonly E[],
): { [K in E]: CoordinatorEvents[K][] } {
  const out = {} as { [K in E]: CoordinatorEvents[K][] };
  for (const name of names) {
    const list: CoordinatorEvents[E][] = [];
    out[name] = list as (typeof out)[E];
    coordinator.on(name, (payload) => {
      list.push(payload);
    });
  }
  return out;
}

/**
 * Collects `unhandledRejection`s from `start()` to `stop()`. Use in beforeEach/afterEach:
 * background failures (renewals, closes, releases) must never surface as unhandled.
 */
export function unhandledRejections(): {
  readonly reasons: unknown[];
  start(): void;
  stop(): Promise<void>;
} {
  const reasons: unknown[] = [];
  const listener = (reason: unknown) => {
    reasons.push(reason);
  };
  return {
    reasons,
    start() {
      reasons.length = 0;
      process.on("unhandledRejection", listener);
    },
    async stop() {
      // Node reports unhandled rejections after the microtask queue drains: give it turns.
      await flush();
      process.off("unhandledRejection", listener);
    },
  };
}

/**
 * Registers hooks that fail the test when any unhandled rejection happens during it: every
 * background failure must reach the user as an event or an aborted signal.
 */
export function failOnUnhandledRejections(): void {
  const unhandled = unhandledRejections();
  beforeEach(() => unhandled.start());
  afterEach(async () => {
    await unhandled.stop();
    expect(unhandled.reasons).toEqual([]);
  });
}

/** Runs createCoordinator(options) and returns the ConfigError it must throw. */
export function configErrorOf(options: unknown): ConfigError {
  let thrown: unknown;
  try {
    createCoordinator(options as CoordinatorOptions);
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(ConfigError);
  return thrown as ConfigError;
}

/** A ManualClock, a scripted backend on it and a coordinator over that backend. */
export function setup(
  options: {
    ttlMs?: number;
    renewEveryMs?: number;
    backend?: ScriptedBackendOptions;
    ownerId?: string;
  } = {},
): { clock: ManualClock; backend: ScriptedBackend; coordinator: Coordinator; ttlMs: number } {
  const clock =
    options.backend?.clock instanceof ManualClock ? options.backend.clock : new ManualClock();
  const backend = new ScriptedBackend({ clock, ...options.backend });
  const ttlMs = options.ttlMs ?? 1_000;
  const coordinator = createCoordinator({
    backend,
    clock,
    ttlMs,
    ...(options.renewEveryMs !== undefined ? { renewEveryMs: options.renewEveryMs } : {}),
    ...(options.ownerId !== undefined ? { ownerId: options.ownerId } : {}),
  });
  return { clock, backend, coordinator, ttlMs };
}

/** Asserts `error` is an instance of `type` with the given properties, and returns it typed. */
export function expectError<T extends Error>(
  error: unknown,
  type: abstract new (...args: never[]) => T,
  props: Partial<Record<keyof T, unknown>> = {},
): T {
  expect(error).toBeInstanceOf(type);
  expect(error).toMatchObject(props);
  return error as T;
}

/** Awaits `promise` and returns what it rejected with; fails if it resolved. */
export async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  let value: unknown;
  try {
    value = await promise;
  } catch (error) {
    return error;
  }
  return expect.unreachable(`expected a rejection, got ${String(value)}`);
}
