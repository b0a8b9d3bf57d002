/**
 * Fault tools: a lock holder in its own process (SIGSTOP, SIGKILL, SIGTERM), a TCP proxy that
 * cuts, blackholes, delays or drops replies, a proxy in front of every host of a URL, a listener
 * that never answers, timers for checking that operations against it are bounded, and the
 * tests every adapter owes such a store and a reset connection.
 *
 * @packageDocumentation
 * @module @baton/conformance/faults
 */
export { type ProxiedHosts, proxyHosts } from "./proxy-hosts.js";
export { type ReleaseResetTarget, releaseResetTests } from "./release-reset-tests.js";
export { closeWhilePending, settleTime, type Timed, timed } from "./settle-time.js";
export { SilentListener } from "./silent-listener.js";
export {
  SILENT_CLOSE_BOUND_MS,
  type SilentStoreTarget,
  silentListenerPerTest,
  silentStoreTests,
} from "./silent-store-tests.js";
export { LockWorker, type LockWorkerOptions, spawnLockWorker } from "./spawn-lock-worker.js";
export { type ProxyMode, TcpProxy } from "./tcp-proxy.js";
export type { TickCheck, WorkerCommand, WorkerEvent } from "./worker-protocol.js";
