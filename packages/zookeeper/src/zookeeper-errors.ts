import { BackendUnavailableError, BatonError, SessionLostError } from "@baton/core";
import zookeeper from "node-zookeeper-client";

/** ZooKeeper error codes Baton reacts to. */
export const ZK_CODE = {
  connectionLoss: zookeeper.Exception.CONNECTION_LOSS,
  operationTimeout: zookeeper.Exception.OPERATION_TIMEOUT,
  noNode: zookeeper.Exception.NO_NODE,
  /** The server does not know the request (a ZooKeeper older than the request). */
  unimplemented: zookeeper.Exception.UNIMPLEMENTED,
  nodeExists: zookeeper.Exception.NODE_EXISTS,
  badVersion: zookeeper.Exception.BAD_VERSION,
  sessionExpired: zookeeper.Exception.SESSION_EXPIRED,
} as const;

/** The ZooKeeper error code of `error`, or `undefined` when it is not a ZooKeeper error. */
export function zkCode(error: unknown): number | undefined {
  const e = error as { getCode?: unknown } | null;
  if (e !== null && typeof e === "object" && typeof e.getCode === "function") {
    const code = (e.getCode as () => unknown)();
    return typeof code === "number" ? code : undefined;
  }
  return undefined;
}

/** True when the reply to a request was lost with the connection (it may have run). */
export function isConnectionLoss(error: unknown): boolean {
  const code = zkCode(error);
  return code === ZK_CODE.connectionLoss || code === ZK_CODE.operationTimeout;
}

/**
 * Baton's error for a failed ZooKeeper call; `context` is what was being done, e.g.
 * `zookeeper acquire of "invoices"`, and `ensemble` the members the client connects to, e.g.
 * `zk1:2181, zk2:2181` (named in the message when given). A `BatonError` passes through
 * unchanged; an expired session is a `SessionLostError` (its locks are lost); anything else a
 * `BackendUnavailableError` with the client's message.
 */
export function toBatonError(error: unknown, context: string, ensemble?: string): BatonError {
  if (error instanceof BatonError) return error;
  const where = ensembleNote(ensemble);
  if (zkCode(error) === ZK_CODE.sessionExpired) {
    return new SessionLostError(`${context}: the ZooKeeper session expired${where}`, {
      cause: error,
    });
  }
  const detail = error instanceof Error ? error.message : String(error);
  return new BackendUnavailableError(`${context} failed${where}: ${detail}`, { cause: error });
}

/** ` (ensemble zk1:2181, zk2:2181)`, or nothing when the members are not known. */
export function ensembleNote(ensemble: string | undefined): string {
  return ensemble === undefined || ensemble === "" ? "" : ` (ensemble ${ensemble})`;
}

/** The error of an acquire whose own node is gone while it waited. */
export function vanishedNode(path: string): BackendUnavailableError {
  return new BackendUnavailableError(
    `zookeeper: our node ${path} disappeared while we waited (deleted by hand, or the session ended)`,
  );
}
