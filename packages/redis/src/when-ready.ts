import { BackendUnavailableError } from "@baton/core";
import { authenticationError, refusedCredentials } from "./auth-failure.js";
import type { RedisClient } from "./redis-client.js";
import { toBatonError } from "./redis-errors.js";

/**
 * Resolves when `client` is connected and ready, starting a lazy client's connection.
 * Rejects with `AuthenticationError` (naming `credentialsField`) at the first refusal of the
 * credentials, with `BackendUnavailableError` (carrying the last connection error) after
 * `timeoutMs` or when the client has ended, and with `signal.reason` when `signal` aborts.
 * `what` names the store in messages, e.g. `redis at 127.0.0.1:6379`.
 */
export function whenReady(
  client: RedisClient,
  timeoutMs: number,
  what: string,
  signal?: AbortSignal,
  credentialsField = "url",
): Promise<void> {
  if (client.status === "ready") return Promise.resolve();
  if (signal?.aborted) return Promise.reject(signal.reason);
  if (client.status === "end") {
    return Promise.reject(new BackendUnavailableError(`${what}: the client connection is closed`));
  }
  return new Promise<void>((resolve, reject) => {
    let lastError: unknown;
    const cleanup = () => {
      clearTimeout(timer);
      client.off("ready", onReady);
      client.off("error", onError);
      client.off("end", onEnd);
      client.off("node error", onNodeError);
      signal?.removeEventListener("abort", onAbort);
    };
    const onReady = () => {
      cleanup();
      resolve();
    };
    const refused = (error: unknown, where: string): boolean => {
      const reply = refusedCredentials(error);
      if (reply === undefined) return false;
      cleanup();
      reject(authenticationError(credentialsField, where, reply, error));
      return true;
    };
    const onError = (error: unknown) => {
      lastError = error;
      refused(error, what);
    };
    // A Cluster names the node that failed.
    const onNodeError = (error: unknown, node: unknown) => {
      lastError = error;
      refused(error, typeof node === "string" ? `redis at ${node}` : what);
    };
    const onEnd = () => {
      cleanup();
      reject(new BackendUnavailableError(`${what}: the connection ended`, { cause: lastError }));
    };
    const onAbort = () => {
      cleanup();
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      cleanup();
      const context = `${what}: not connected within ${timeoutMs} ms`;
      // The last connection error says why: "<context>: connect ECONNREFUSED ...".
      reject(
        lastError instanceof Error
          ? toBatonError(lastError, context)
          : new BackendUnavailableError(context, { cause: lastError }),
      );
    }, timeoutMs);
    client.on("ready", onReady);
    client.on("error", onError);
    client.on("end", onEnd);
    client.on("node error", onNodeError);
    signal?.addEventListener("abort", onAbort, { once: true });
    if (client.status === "wait") client.connect().catch(() => undefined);
  });
}
