import type { BackendSession, Coordinator, LockBackend } from "@baton/core";
import { measureCoreShare, recordingBackend } from "./core-share.js";
import type { InterleaveOptions, Variant } from "./interleave.js";
import type { CoreShare } from "./results.js";
import { benchCoordinator } from "./telemetry.js";

/** Options of {@link openBatonVariants}. */
export interface BatonVariantsOptions {
  /** The coordinator's backend; also the session's unless `sessionBackend` is given. */
  readonly backend: LockBackend;
  /** The session's own backend (so each row's server processes are known apart). */
  readonly sessionBackend?: LockBackend;
  /** The coordinator's TTL, ms. */
  readonly coordinatorTtlMs: number;
  /** The session's TTL, ms. */
  readonly sessionTtlMs: number;
  readonly sessionLock: string;
  readonly coordinatorLock: string;
  /** Adds the reference row of the session trying once. */
  readonly tryRow?: boolean;
}

/** Baton's rows of an uncontended bench and what closes their session, coordinator and backends. */
export interface OpenBatonVariants {
  readonly variants: Variant[];
  /**
   * Core's share, measured on its own against the coordinator's own backend session (see
   * `measureCoreShare`); run it after the section's rounds.
   */
  coreShare(
    rounds: Pick<InterleaveOptions, "warmup" | "perRound" | "maxMs">,
  ): Promise<CoreShare | undefined>;
  close(): Promise<void>;
}

/**
 * Opens a session (owner `bench-session`) and a coordinator on the backends given and returns
 * their {@link batonVariants}. `close` closes the session, the coordinator, then the backends.
 */
export async function openBatonVariants(options: BatonVariantsOptions): Promise<OpenBatonVariants> {
  const { backend } = options;
  const sessionBackend = options.sessionBackend ?? backend;
  const opened: BackendSession[] = [];
  const coordinator = benchCoordinator({
    backend: recordingBackend(backend, opened),
    ttlMs: options.coordinatorTtlMs,
  });
  const session = await sessionBackend.openSession({
    ttlMs: options.sessionTtlMs,
    ownerId: "bench-session",
  });
  return {
    variants: batonVariants(session, coordinator, options),
    coreShare: (rounds) =>
      measureCoreShare(coordinator, opened, { ...rounds, lock: options.coordinatorLock }),
    close: async () => {
      await session.close();
      await coordinator.close();
      await backend.close();
      if (sessionBackend !== backend) await sessionBackend.close();
    },
  };
}

/**
 * The Baton rows every backend's uncontended bench has: the adapter's session alone (acquire +
 * release, no core), and the same through a coordinator (core included). The session asks as
 * the coordinator's `acquire(name)` does (it waits, up to 60 s by default), so the two rows
 * make the same calls to the adapter and their difference is core's share. With `tryRow`, a
 * reference row of the session trying once (`wait: false`, what `waitMs: 0` asks for).
 */
export function batonVariants(
  session: BackendSession,
  coordinator: Coordinator,
  options: { sessionLock: string; coordinatorLock: string; tryRow?: boolean },
): Variant[] {
  const signal = new AbortController().signal;
  const sessionOp = (name: string, wait: boolean) => async () => {
    const grant = await session.acquire(name, { wait, signal });
    if (grant === null) throw new Error("bench: session lock held");
    await session.release(grant);
  };
  return [
    {
      name: "baton session acquire+release",
      role: "session",
      op: sessionOp(options.sessionLock, true),
    },
    ...(options.tryRow
      ? [
          {
            name: "baton session, try once (wait: false)",
            role: "reference" as const,
            op: sessionOp(`${options.sessionLock}-try`, false),
          },
        ]
      : []),
    {
      name: "baton coordinator acquire+release",
      role: "coordinator",
      op: async () => {
        const lock = await coordinator.acquire(options.coordinatorLock);
        await lock.release();
      },
    },
  ];
}
