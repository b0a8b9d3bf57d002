import type { BackendSession, Coordinator, LockBackend } from "@baton/core";
import { coreShareOf, type InterleaveOptions, interleave, type Variant } from "./interleave.js";
import type { CoreShare } from "./results.js";

/** Rounds of {@link measureCoreShare}: many short ones, for the median of their differences. */
export const CORE_SHARE_ROUNDS = 60;

/**
 * A backend that hands out what its `openSession` opens also to `opened`: the bench gets hold
 * of the session a coordinator opens (on its own connection), to call the adapter on it directly.
 */
export function recordingBackend(backend: LockBackend, opened: BackendSession[]): LockBackend {
  return new Proxy(backend, {
    get(target, key) {
      if (key === "openSession") {
        return async (...args: Parameters<LockBackend["openSession"]>) => {
          const session = await target.openSession(...args);
          opened.push(session);
          return session;
        };
      }
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/**
 * Core's share measured on its own: the coordinator's acquire + release against the same
 * calls made straight to the backend session that coordinator opened (its connection, its
 * ensemble member, its lease), in {@link CORE_SHARE_ROUNDS} interleaved rounds; the median of
 * the rounds' differences in client CPU per operation (see `coreShareOf`).
 *
 * Why the coordinator's own session, not the section's session row: that row has a session
 * and connection of its own, and two connections differ by more than core costs (measured on
 * ZooKeeper: tens of microseconds of client CPU and p50 between a client on the leader and one
 * on a follower).
 */
export async function measureCoreShare(
  coordinator: Coordinator,
  opened: readonly BackendSession[],
  options: { readonly lock: string } & Pick<InterleaveOptions, "warmup" | "perRound" | "maxMs">,
): Promise<CoreShare | undefined> {
  const signal = new AbortController().signal;
  // The coordinator opens its session on its first acquire (the warm-up's, at the latest).
  const session = () => {
    const first = opened[0];
    if (first === undefined) throw new Error("bench: the coordinator opened no session");
    return first;
  };
  const bareLock = `${options.lock}-bare`;
  const variants: Variant[] = [
    {
      name: "coordinator",
      role: "coordinator",
      op: async () => {
        const lock = await coordinator.acquire(options.lock);
        await lock.release();
      },
    },
    {
      name: "the coordinator's backend session, called directly",
      role: "session",
      op: async () => {
        const grant = await session().acquire(bareLock, { wait: true, signal });
        if (grant === null) throw new Error("bench: session lock held");
        await session().release(grant);
      },
    },
  ];
  const results = await interleave(variants, { ...options, rounds: CORE_SHARE_ROUNDS });
  const share = coreShareOf(variants, results);
  return share === undefined ? undefined : { ...share, sameSession: true };
}
