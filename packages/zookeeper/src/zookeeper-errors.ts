import { BackendUnavailableError, BatonError, SessionLostError } from "@baton/core";
import zookeeper from "node-zookeeper-client";

/** ZooKeeper error codes Baton reacts to. */
export const ZK_CODE = {
  connectionLoss: zookeeper.Exception.CONNECTION_LOSS,
  operationTimeout: zookeeper.Exception.OPERATION_TIMEOUT,
  noNode: zookeeper.Exception.NO_NODE,
  nodeExists: zookeeper.Exception.NODE_EXISTS,
  sessionExpired: zookeeper.Exception.SESSION_EXPIRED,
  authFailed: zookeeper.Exception.AUTH_FAILED,
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

/** Baton's error for a failed ZooKeeper call made while doing `what`. */
export function toBatonError(error: unknown, what: string): unknown {
  if (error instanceof BatonError) return error;
  const code = zkCode(error);
  const detail = error instanceof Error ? error.message : String(error);
  if (code === ZK_CODE.sessionExpired) {
    return new SessionLostError(`the ZooKeeper session expired (${what})`, { cause: error });
  }
  return new BackendUnavailableError(`zookeeper: ${what} failed: ${detail}`, { cause: error });
}
