import type { BackendSession, LockBackend, OpenSessionOptions } from "@baton/core";

/**
 * `inner`, counting the sessions opened through it: for tests that bad input is refused
 * before any I/O (it must open none). `close()` leaves `inner` open.
 */
export function countingBackend(inner: LockBackend): {
  backend: LockBackend;
  opened: () => number;
} {
  let opened = 0;
  return {
    backend: {
      kind: inner.kind,
      guarantees: inner.guarantees,
      openSession(options: OpenSessionOptions): Promise<BackendSession> {
        opened++;
        return inner.openSession(options);
      },
      close: async () => undefined,
    },
    opened: () => opened,
  };
}
