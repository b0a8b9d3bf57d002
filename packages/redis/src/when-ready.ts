import { BackendUnavailableError } from "@baton/core";
import type { RedisClient } from "./redis-client.js";
import { toBatonError } from "./redis-errors.js";

/**
 * Resolves when `client` is connected and ready, starting a lazy client's connection.
 * Rejects with `BackendUnavailableError` (carrying the last connection error) after
 * `timeoutMs` or when the client has ended, and with `signal.reason` when `signal` aborts.
 */
export function whenReady(
  client: RedisClient,
  timeoutMs: number,
  what: string,
  signal?: AbortSignal,
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
      signal?.removeEventListener("abort", onAbort);
    };
    const onReady = () => {
      cleanup();
      resolve();
    };
    const onError = (error: unknown) => {
      lastError = error;
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
    signal?.addEventListener("abort", onAbort, { once: true });
    if (client.status === "wait") client.connect().catch(() => undefined);
  });
}
