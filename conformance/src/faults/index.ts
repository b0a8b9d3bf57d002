export { type ProxiedHosts, proxyHosts } from "./proxy-hosts.js";
export { LockWorker, type LockWorkerOptions, spawnLockWorker } from "./spawn-lock-worker.js";
export { type ProxyMode, TcpProxy } from "./tcp-proxy.js";
export type { WorkerCommand, WorkerEvent } from "./worker-protocol.js";
