import { ConfigError } from "../contract/errors.js";

/** The error of a semaphore or read-write lock on a backend without them. */
export function noPermitsError(kind?: string): ConfigError {
  return new ConfigError(
    "backend",
    `${kind === undefined ? "this backend's sessions have" : `the ${kind} backend has`} no semaphores or read-write locks (its guarantees declare semaphores: false); use memory, redis, etcd, zookeeper or postgres (advisory locks, not ?locks=lease)`,
  );
}

/** The error of `runOnce` or `schedule` on a backend that keeps no durable records. */
export function noRecordsError(kind: string): ConfigError {
  return new ConfigError(
    "backend",
    `the ${kind} backend keeps no durable records, which runOnce and schedule need to remember a slot is done; use memory, redis, etcd, zookeeper or postgres`,
  );
}
