import {
  type BackendSession,
  type LockBackend,
  type OpenSessionOptions,
  SessionLostError,
} from "@baton/core";

/**
 * `inner` with a switch: once `loseSessions()` is called, every renewal of the sessions it
 * opened fails with a `SessionLostError`, as when the store ends a session on its own. For
 * tests of how a loss reaches the user while their code runs. `close()` leaves `inner` open.
 */
export function losableBackend(inner: LockBackend): {
  backend: LockBackend;
  loseSessions: () => void;
} {
  let lost = false;
  const wrap = (session: BackendSession): BackendSession =>
    new Proxy(session, {
      get(target, property) {
        if (property === "keepAlive" && lost) {
          return () => Promise.reject(new SessionLostError("the store ended the session"));
        }
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  const backend: LockBackend = {
    kind: inner.kind,
    guarantees: inner.guarantees,
    openSession: async (options: OpenSessionOptions) => wrap(await inner.openSession(options)),
    close: async () => undefined,
  };
  return {
    backend,
    loseSessions: () => {
      lost = true;
    },
  };
}
