import type { ServerGroup } from "@baton/conformance/harness";
import {
  type BackendSession,
  type Coordinator,
  createBackend,
  type LockBackend,
} from "@baton/core";
import { type Contender, type HandoffGroup, handoffSection, measureHandoffs } from "./handoff.js";
import { type InterleaveOptions, interleave, latencySection, type Variant } from "./interleave.js";
import type { LatencySection, Row } from "./results.js";
import { benchCoordinator } from "./telemetry.js";

/** Permits of the uncontended bench's semaphores (each acquire takes 1 of them). */
export const UNCONTENDED_PERMITS = 4;
/** Permits of the handoff's semaphore; all but one are held throughout by another holder. */
export const HANDOFF_PERMITS = 4;
/** Waiters at each release in the permit handoff. */
export const PERMIT_WAITERS = 8;
/** Semaphores the held permits are spread over (see `permitItems`). */
export const HELD_SEMAPHORES = 100;

/** The server time options of the permit sections, and what closes their connections. */
export interface PermitServer {
  readonly options: Pick<InterleaveOptions, "server" | "idleMs">;
  close(): Promise<void>;
}

/** A backend's own rows of the uncontended permit section, and what closes them. */
export interface PermitRows {
  /** Rows before Baton's: the raw floor (role `floor`) and its references. */
  readonly floor: readonly Variant[];
  /** Rows after Baton's: peer libraries' semaphores. */
  readonly peers?: readonly Variant[];
  readonly notes?: readonly string[];
  close(): Promise<void>;
}

/** A backend's own groups of the permit handoff (peer libraries), and what closes them. */
export interface PermitHandoffRows {
  readonly after: readonly HandoffGroup[];
  readonly notes?: readonly string[];
  close(): Promise<void>;
}

/**
 * What one backend's bench supplies for the permit figures: how long to measure, and
 * optionally its own rows. Baton's rows (the adapter's session alone and the coordinator)
 * need only the URL, and a backend without a floor here is measured without one (its floor
 * target then says so).
 */
export interface PermitBench {
  /**
   * The raw client doing the round trips the adapter's permit acquire + release do, and the
   * peers; given the harness's URL and servers.
   */
  uncontended?(url: string, group: ServerGroup | undefined): Promise<PermitRows>;
  /** Peer libraries' groups for the handoff. */
  handoff?(url: string, group: ServerGroup | undefined): Promise<PermitHandoffRows>;
  /** The server time of both sections. Default: the harness's server processes' CPU. */
  server?(url: string, group: ServerGroup | undefined): Promise<PermitServer>;
  /** Why there is no floor, when {@link PermitBench.uncontended} gives none. */
  readonly noFloor?: string;
  /** Adds the reference row of the session trying once (`wait: false`). */
  readonly tryRow?: boolean;
  /** Warmup and rounds of the uncontended rows. */
  readonly rounds: Pick<InterleaveOptions, "warmup" | "rounds" | "perRound" | "maxMs">;
  /** Permit handoffs measured per group. */
  readonly handoffs: number;
  /** The coordinators' TTL, ms. */
  readonly ttlMs: number;
}

/**
 * Baton's permit rows: the adapter's session alone (`acquirePermits` of 1 of
 * {@link UNCONTENDED_PERMITS}, waiting as the coordinator's `acquire()` asks, then `release`)
 * and the coordinator's `semaphore(name, { permits }).acquire()` then `release()`, each on its
 * own semaphore; with `tryRow`, the session trying once.
 */
export function batonPermitVariants(
  session: BackendSession,
  coordinator: Coordinator,
  tryRow: boolean,
): Variant[] {
  const signal = new AbortController().signal;
  const acquirePermits = session.acquirePermits?.bind(session);
  if (acquirePermits === undefined)
    throw new Error("bench: this backend's sessions have no permits");
  const sessionOp = (key: string, wait: boolean) => async () => {
    const grant = await acquirePermits(key, {
      limit: UNCONTENDED_PERMITS,
      permits: 1,
      mode: "permit",
      wait,
      signal,
    });
    if (grant === null) throw new Error("bench: no session permit free");
    await session.release(grant);
  };
  const semaphore = coordinator.semaphore("bench-permit-coordinator", {
    permits: UNCONTENDED_PERMITS,
  });
  return [
    {
      name: "baton session acquirePermits+release",
      role: "session",
      op: sessionOp("bench-permit-session", true),
    },
    ...(tryRow
      ? [
          {
            name: "baton session permit, try once (wait: false)",
            role: "reference" as const,
            op: sessionOp("bench-permit-session-try", false),
          },
        ]
      : []),
    {
      name: "baton coordinator semaphore acquire+release",
      role: "coordinator",
      op: async () => {
        const permit = await semaphore.acquire();
        await permit.release();
      },
    },
  ];
}

/**
 * The uncontended permit section: the backend's floor rows, Baton's session and coordinator
 * rows (one backend from the URL, shared), then the peers, interleaved.
 */
export async function measurePermitUncontended(
  bench: PermitBench,
  backend: LockBackend,
  url: string,
  group: ServerGroup | undefined,
  server: PermitServer["options"],
): Promise<LatencySection> {
  const own = await bench.uncontended?.(url, group);
  const coordinator = benchCoordinator({ backend, ttlMs: bench.ttlMs });
  const session = await backend.openSession({ ttlMs: 60_000, ownerId: "bench-permit-session" });
  try {
    const variants = [
      ...(own?.floor ?? []),
      ...batonPermitVariants(session, coordinator, bench.tryRow ?? false),
      ...(own?.peers ?? []),
    ];
    const results = await interleave(variants, { ...bench.rounds, ...server });
    return latencySection(
      "permit-uncontended",
      `uncontended permit acquire + release (1 of a semaphore's ${UNCONTENDED_PERMITS})`,
      variants,
      results,
      [
        ...(own?.notes ?? []),
        ...(own?.floor.some((v) => v.role === "floor")
          ? []
          : [`no floor: ${bench.noFloor ?? "none written for this backend yet"}`]),
        "Baton's session and coordinator share one backend, created from the URL; each row has a semaphore of its own",
      ],
    );
  } finally {
    await session.close();
    await coordinator.close();
    await own?.close();
  }
}

/** Coordinators as contenders for 1 permit each of semaphore `name` (each waits up to a minute). */
export function permitContenders(
  coordinators: readonly Coordinator[],
  name: string,
  permits: number,
): Contender[] {
  return coordinators.map((c) => {
    const semaphore = c.semaphore(name, { permits });
    return {
      acquire: async () => {
        const permit = await semaphore.acquire({ waitMs: 60_000 });
        return async () => {
          await permit.release();
        };
      },
    };
  });
}

/**
 * The permit handoff: a semaphore of {@link HANDOFF_PERMITS} permits, all but one held
 * throughout by a coordinator of its own, and {@link PERMIT_WAITERS} + 1 coordinators (each
 * its own backend from the URL) contending for the last one, so up to
 * {@link PERMIT_WAITERS} wait at each release (see `measureHandoffs`); then the peers' groups.
 * The ratio base is the floor's uncontended permit acquire + release.
 */
export async function measurePermitHandoffs(
  bench: PermitBench,
  url: string,
  floor: Row | undefined,
  group: ServerGroup | undefined,
  server: PermitServer["options"],
): Promise<LatencySection> {
  const name = "bench-permit-handoff";
  const own = await bench.handoff?.(url, group);
  const holder = benchCoordinator({ url, ttlMs: bench.ttlMs, ownerId: "handoff-holder" });
  const coordinators = Array.from({ length: PERMIT_WAITERS + 1 }, (_, i) =>
    benchCoordinator({ url, ttlMs: bench.ttlMs, ownerId: `handoff-${i}` }),
  );
  try {
    const held = await holder
      .semaphore(name, { permits: HANDOFF_PERMITS })
      .acquire({ permits: HANDOFF_PERMITS - 1 });
    const rows = await measureHandoffs(
      [
        {
          name: "baton coordinator semaphore acquire (wait)",
          role: "coordinator",
          contenders: permitContenders(coordinators, name, HANDOFF_PERMITS),
        },
        ...(own?.after ?? []),
      ],
      { handoffs: bench.handoffs, ...server },
    );
    await held.release();
    const section = handoffSection(PERMIT_WAITERS, rows, floor, [
      `a semaphore of ${HANDOFF_PERMITS} permits, ${HANDOFF_PERMITS - 1} of them held throughout by another holder; ${PERMIT_WAITERS + 1} contenders for the last one, each its own coordinator (own backend from the URL)`,
      ...(own?.notes ?? []),
    ]);
    return {
      ...section,
      figure: "permit-handoff",
      title: `permit handoff to the next of ${PERMIT_WAITERS} waiters (release() -> next holder)`,
    };
  } finally {
    await Promise.all([holder, ...coordinators].map((c) => c.close()));
    await own?.close();
  }
}

/**
 * The backend the URL names, when its guarantees declare semaphores; otherwise it is closed
 * and undefined is returned.
 */
export async function semaphoreBackend(url: string): Promise<LockBackend | undefined> {
  const backend = await createBackend(url);
  if (backend.guarantees.semaphores) return backend;
  await backend.close();
  return undefined;
}
