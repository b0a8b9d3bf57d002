import {
  type BackendSession,
  type LockBackend,
  MEMORY_GUARANTEES,
  MemoryBackend,
  type MemoryBackendOptions,
} from "../../src/index.js";

/**
 * A backend of kind `kind` over a memory backend whose sessions pass every call through,
 * except what `overrides(session)` gives (a method set to `undefined` is left out): a store
 * that answers late, reports lost keys, or lacks permits, for tests of what core does then.
 */
export function wrappedMemory(
  kind: string,
  overrides: (session: BackendSession) => Partial<BackendSession>,
  options?: MemoryBackendOptions,
): LockBackend {
  const inner = new MemoryBackend(options);
  return {
    kind,
    guarantees: MEMORY_GUARANTEES,
    openSession: async (open) => {
      const session = await inner.openSession(open);
      const passThrough: BackendSession = {
        ownerId: session.ownerId,
        ttlMs: session.ttlMs,
        keepAlive: () => session.keepAlive(),
        acquire: (key, o) => session.acquire(key, o),
        release: (grant) => session.release(grant),
        holder: (key) => session.holder(key),
        acquirePermits: (key, o) => session.acquirePermits?.(key, o) ?? Promise.resolve(null),
        permitHolders: (key) => session.permitHolders?.(key) ?? Promise.resolve([]),
        downgrade: (grant) => session.downgrade?.(grant) ?? Promise.resolve(null),
        close: () => session.close(),
      };
      return { ...passThrough, ...overrides(session) };
    },
    close: () => inner.close(),
  };
}
