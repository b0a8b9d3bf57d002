import { randomUUID } from "node:crypto";
import {
  type BackendPermitOptions,
  type BackendSession,
  type Coordinator,
  type CoordinatorOptions,
  createCoordinator,
  type Grant,
  type LockBackend,
} from "@baton/core";
import type { ConformanceTarget } from "./target.js";

/**
 * Per-suite helpers: the backend under test, coordinators and raw sessions that are closed
 * after each test, and unique lock names.
 */
export class SuiteContext {
  readonly target: ConformanceTarget;
  #backend: LockBackend | undefined;
  readonly #prefix: string;
  #seq = 0;
  readonly #coordinators: Coordinator[] = [];
  readonly #sessions: BackendSession[] = [];

  constructor(target: ConformanceTarget) {
    this.target = target;
    this.#prefix = target.namePrefix ?? `conf-${randomUUID().slice(0, 8)}`;
  }

  /** The backend under test (after `start()`). */
  get backend(): LockBackend {
    if (this.#backend === undefined) throw new Error("conformance: backend not started");
    return this.#backend;
  }

  async start(): Promise<void> {
    this.#backend = await this.target.createBackend();
  }

  async stop(): Promise<void> {
    await this.cleanup();
    await this.#backend?.close();
    this.#backend = undefined;
  }

  /** A lock name no other test uses. */
  name(label: string): string {
    this.#seq += 1;
    return `${this.#prefix}/${label}-${this.#seq}`;
  }

  /** A coordinator on the backend under test, closed after the test. */
  coordinator(options: Omit<CoordinatorOptions, "backend" | "url"> = {}): Coordinator {
    // The suite's backend outlives each test's coordinators: stop() closes it.
    return this.#track(this.backend, false, options);
  }

  /**
   * A coordinator on a second backend of its own to the same server (as in another process:
   * no connection, in-process wake-up or cache shared with {@link coordinator}'s), closed with
   * its backend after the test.
   */
  async coordinatorElsewhere(
    options: Omit<CoordinatorOptions, "backend" | "url"> = {},
  ): Promise<Coordinator> {
    return this.#track(await this.target.createBackend(), true, options);
  }

  /** A coordinator on `backend` (at the target's TTL unless `options` say), closed after the test. */
  #track(
    backend: LockBackend,
    closeBackend: boolean,
    options: Omit<CoordinatorOptions, "backend" | "url">,
  ): Coordinator {
    const coordinator = createCoordinator({
      backend,
      closeBackend,
      ttlMs: this.target.ttlMs,
      ...options,
    });
    this.#coordinators.push(coordinator);
    return coordinator;
  }

  /**
   * Acquires `name` on a raw session that is never renewed (a frozen holder): its lease runs
   * out after the TTL unless the test releases first.
   */
  async frozenHolder(
    name: string,
    ttlMs = this.target.ttlMs,
  ): Promise<{ session: BackendSession; grant: Grant }> {
    const session = await this.backend.openSession({
      ttlMs,
      ownerId: `frozen-${randomUUID().slice(0, 8)}`,
    });
    this.#sessions.push(session);
    const grant = await session.acquire(name, {
      wait: false,
      signal: new AbortController().signal,
    });
    if (grant === null)
      throw new Error(`conformance: frozen holder could not take free lock "${name}"`);
    await this.target.freezeSession?.(session);
    return { session, grant };
  }

  /**
   * Takes free permits of permit key `name` (`options`, never waiting) on a raw session that
   * is never renewed (a frozen holder): they are freed after the TTL unless the test releases
   * them first.
   */
  async frozenPermitHolder(name: string, options: BackendPermitOptions): Promise<Grant> {
    const session = await this.session();
    if (session.acquirePermits === undefined) {
      throw new Error("conformance: a backend with semaphores has acquirePermits");
    }
    const grant = await session.acquirePermits(name, { ...options, wait: false });
    if (grant === null) {
      throw new Error(
        `conformance: frozen holder could not take ${options.permits} free permits (${options.mode}) of "${name}"`,
      );
    }
    await this.target.freezeSession?.(session);
    return grant;
  }

  /** A raw backend session (no core, never renewed), closed after the test. */
  async session(ttlMs = this.target.ttlMs): Promise<BackendSession> {
    const session = await this.backend.openSession({
      ttlMs,
      ownerId: `raw-${randomUUID().slice(0, 8)}`,
    });
    this.#sessions.push(session);
    return session;
  }

  /** Closes every coordinator and raw session the test opened. */
  async cleanup(): Promise<void> {
    const coordinators = this.#coordinators.splice(0);
    const sessions = this.#sessions.splice(0);
    await Promise.allSettled([
      ...coordinators.map((c) => c.close()),
      ...sessions.map((s) => s.close()),
    ]);
  }
}

/** Resolves after `ms` of real time. */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Resolves what `promise` settled to without throwing: `{ ok, value | error }`. */
export async function settle<T>(
  promise: Promise<T>,
): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await promise };
  } catch (error) {
    return { ok: false, error };
  }
}
