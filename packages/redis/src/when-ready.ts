import { BackendUnavailableError } from "@baton/core";
import { authenticationError, refusedCredentials } from "./auth-failure.js";
import type { RedisClient } from "./redis-client.js";
import { toBatonError } from "./redis-errors.js";

/**
 * Resolves when `client` is connected and ready, starting a lazy client's connection. A
 * Cluster is ready once it knows the slots and its connection to every master is ready, so
 * the first command finds the node its key lives on connected.
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
  if (client.status === "ready" && unreadyMasters(client).length === 0) return Promise.resolve();
  if (signal?.aborted) return Promise.reject(signal.reason);
  if (client.status === "end") {
    return Promise.reject(new BackendUnavailableError(`${what}: the client connection is closed`));
  }
  return new Promise<void>((resolve, reject) => {
    let lastError: unknown;
    const watched = new Set<NodeClient>();
    const cleanup = () => {
      clearTimeout(timer);
      for (const node of watched) node.off("ready", onReady);
      watched.clear();
      client.off("+node", onReady);
      client.off("-node", onReady);
      client.off("ready", onReady);
      client.off("error", onError);
      client.off("end", onEnd);
      client.off("node error", onNodeError);
      signal?.removeEventListener("abort", onAbort);
    };
    // Checked again at the client's "ready", a master's "ready" and a change of nodes.
    const onReady = () => {
      if (client.status !== "ready") return;
      const pending = unreadyMasters(client);
      if (pending.length === 0) {
        cleanup();
        resolve();
        return;
      }
      for (const node of pending) {
        if (watched.has(node)) continue;
        watched.add(node);
        node.on("ready", onReady);
      }
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
    client.on("+node", onReady);
    client.on("-node", onReady);
    client.on("error", onError);
    client.on("end", onEnd);
    client.on("node error", onNodeError);
    signal?.addEventListener("abort", onAbort, { once: true });
    if (client.status === "wait") client.connect().catch(() => undefined);
    else onReady();
  });
}

/** A Cluster's connection to one node, as far as the wait needs it. */
interface NodeClient {
  readonly status: string;
  on(event: "ready", listener: () => void): unknown;
  off(event: "ready", listener: () => void): unknown;
}

/**
 * The masters of an ioredis Cluster whose connections are opening (neither ready nor lazy:
 * a lazy node, in `"wait"`, connects at its first command and queues it); none for other
 * clients.
 */
function unreadyMasters(client: RedisClient): NodeClient[] {
  const nodes = (client as { nodes?: (role: "master") => NodeClient[] }).nodes;
  if (!client.isCluster || typeof nodes !== "function") return [];
  return nodes.call(client, "master").filter((n) => n.status !== "ready" && n.status !== "wait");
}
