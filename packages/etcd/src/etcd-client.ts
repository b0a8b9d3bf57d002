/**
 * What the etcd backend needs from an etcd client you pass as `client`: the members of an
 * `Etcd3` client (from the `etcd3` package) that Baton calls, described by their shape so that
 * Baton's published types do not depend on the `etcd3` package's own declarations. Any
 * `Etcd3` instance fits it; build one yourself to choose TLS, authentication, gRPC or
 * fault-handling options.
 *
 * Baton calls only what is listed here. Each unary call gets a gRPC `deadline`; streams are
 * opened without options and ended with `end()` then `cancel()`.
 *
 * @example
 * // Etcd3 is the etcd3 package's client class.
 * const backend = new EtcdBackend({ client: new Etcd3({ hosts: ["127.0.0.1:2379"] }) });
 */
export interface EtcdClient {
  /** The KV service: transactions (every write) and linearizable range reads. */
  readonly kv: {
    /** `KV.Txn`: a compare-and-swap transaction. */
    txn(request: object, options?: EtcdCallOptions): Promise<object>;
    /** `KV.Range`: reads keys of a range. */
    range(request: object, options?: EtcdCallOptions): Promise<object>;
  };
  /** The Lease service: one lease per Baton session. */
  readonly leaseClient: {
    /** `Lease.LeaseGrant`: opens a session's lease. */
    leaseGrant(request: object, options?: EtcdCallOptions): Promise<object>;
    /** `Lease.LeaseRevoke`: ends a session, deleting its keys. */
    leaseRevoke(request: object, options?: EtcdCallOptions): Promise<object>;
    /** `Lease.LeaseTimeToLive`: time left on a holder's lease. */
    leaseTimeToLive(request: object, options?: EtcdCallOptions): Promise<object>;
    /** `Lease.LeaseKeepAlive`: the stream a session renews its lease on. */
    leaseKeepAlive(): Promise<EtcdStream>;
  };
  /** The Watch service: waiting for a predecessor's delete, and `watch()`. */
  readonly watchClient: {
    /** `Watch.Watch`: one stream per wait. */
    watch(): Promise<EtcdStream>;
  };
  /** Closes every connection; called by `EtcdBackend.close()` only on a client it built. */
  close(): void;
}

/** The call options Baton passes to each unary call of an {@link EtcdClient}. */
export interface EtcdCallOptions {
  /** When the call gives up (gRPC deadline). */
  readonly deadline?: Date | number;
}

/** A gRPC bidirectional stream of an {@link EtcdClient}, as Baton uses it. */
export interface EtcdStream {
  /** Sends one request. */
  write(request: never): void;
  /** Half-closes the stream. */
  end(): void;
  /** Cancels the stream. */
  cancel(): void;
  /** Listens for `data` (one response), `error` and `end`. */
  on(event: "data" | "error" | "end", listener: (value: unknown) => void): unknown;
}
