import type { BackendSession, Coordinator } from "@baton/core";
import type { Variant } from "./interleave.js";

/**
 * The two Baton rows every backend's uncontended bench has: the adapter's session alone
 * (acquire + release, no core), and the same through a coordinator (core included).
 */
export function batonVariants(
  session: BackendSession,
  coordinator: Coordinator,
  options: { sessionLock: string; coordinatorLock: string; wait?: boolean },
): Variant[] {
  const signal = new AbortController().signal;
  return [
    {
      name: "baton session acquire+release",
      role: "session",
      op: async () => {
        const grant = await session.acquire(options.sessionLock, {
          wait: options.wait ?? false,
          signal,
        });
        if (grant === null) throw new Error("bench: session lock held");
        await session.release(grant);
      },
    },
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
