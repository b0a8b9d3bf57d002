import type { BackendSession, Coordinator } from "@baton/core";
import type { Variant } from "./interleave.js";

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
