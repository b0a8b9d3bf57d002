import type { BackendSession, LockBackend } from "@baton/core";

/** What a backend hands the conformance suite. */
export interface ConformanceTarget {
  /** Shown in test titles, e.g. `"etcd"`. */
  readonly name: string;
  /** Creates a backend connected to the server under test. Called once per suite; closed after. */
  createBackend(): LockBackend | Promise<LockBackend>;
  /** A short TTL the backend accepts, used where a test waits for expiry (memory: 300; etcd: 2000). */
  readonly ttlMs: number;
  /**
   * Makes `session` stop renewing, as a frozen holder would. Default: nothing, since a raw
   * session is renewed only by `keepAlive()` calls, which the suite never makes. Adapters
   * whose client renews on its own (ZooKeeper pings) cut it here.
   */
  freezeSession?(session: BackendSession): void | Promise<void>;
  /** Contenders in the mutual-exclusion test (default 8). */
  readonly contenders?: number;
  /** Critical sections per contender (default 50). */
  readonly sectionsPerContender?: number;
  /**
   * The backend's URL, for groups whose holders run in worker processes (leader election with
   * SIGKILL/SIGSTOP/SIGTERM). Without it, or for a backend that is not cross-process, those
   * groups are skipped with a printed reason.
   */
  readonly url?: string | (() => string);
  /** Prefix for lock names, so runs against one server do not meet (default a random one). */
  readonly namePrefix?: string;
  /**
   * A backend like the one {@link ConformanceTarget.url} connects to, with every connection
   * routed through proxies the fault scenarios control (link cut, blackhole, delayed or
   * dropped replies). `proxy` starts one proxy to a `host:port` and resolves to the address
   * to connect to instead. Give it when the backend's client does not stay on the hosts of its
   * URL, such as a Redis Cluster client, which connects to each node at the address the node
   * announces. Without it, the suite puts a proxy in front of the URL's hosts and connects
   * through them by URL. The suite closes the backend after the test.
   */
  proxiedBackend?(
    proxy: (to: ProxyTarget) => Promise<ProxyTarget>,
  ): LockBackend | Promise<LockBackend>;
}

/** A `host:port` a proxy forwards to, or listens on. */
export interface ProxyTarget {
  readonly host: string;
  readonly port: number;
}
