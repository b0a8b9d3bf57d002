import {
  type BackendSession,
  BackendUnavailableError,
  boundedCall,
  type Guarantees,
  type LockBackend,
  type OpenSessionOptions,
} from "@baton/core";
import { leaseHex } from "./etcd-keys.js";
import { EtcdKv } from "./etcd-kv.js";
import { type EtcdBackendOptions, resolveEtcdOptions } from "./etcd-options.js";
import { EtcdSession } from "./etcd-session.js";
import { leaseSeconds, MIN_LEASE_SECONDS } from "./lease-ttl.js";

/**
 * What the etcd backend guarantees: fencing tokens that rise with every grant (revisions),
 * FIFO queues, consensus (Raft), exclusion across processes, records, semaphores and
 * read-write locks (entries on the session's lease, one queue per name), inspection and the
 * forced release of one grant (see etcd-inspection.ts), and leases of whole
 * seconds, at least {@link MIN_LEASE_SECONDS}, so `createCoordinator` refuses another `ttlMs`.
 */
export const ETCD_GUARANTEES: Guarantees = {
  fencing: "monotonic",
  fifo: true,
  consensus: true,
  crossProcess: true,
  records: true,
  semaphores: true,
  inspection: true,
  forceRelease: "grant",
  ttlSteps: { stepMs: 1_000, minMs: MIN_LEASE_SECONDS * 1_000 },
};

/**
 * The etcd backend (`etcd://h1:2379,h2:2379`): one lease per session, locks as queue keys
 * `<prefix><name>/<lease hex>` ordered by create revision (FIFO), the revision of the write
 * that took a grant as its fencing token (at least the revision at which the grant took
 * effect, like `etcdctl lock`'s `ETCD_LOCK_REV`), waiting by watching only the predecessor's
 * delete.
 *
 * @example
 * const backend = new EtcdBackend({ hosts: ["127.0.0.1:2379"] });
 * const coordinator = createCoordinator({ backend, ttlMs: 10_000 });
 */
export class EtcdBackend implements LockBackend {
  readonly kind = "etcd";
  readonly guarantees = ETCD_GUARANTEES;
  /** Key prefix of every lock. */
  readonly prefix: string;
  /**
   * Where the backend connects: the members of `hosts`, e.g. `etcd1:2379, etcd2:2379`; never
   * the user nor the password. Named in core's messages about it; undefined for a given
   * `client`.
   */
  readonly endpoint: string | undefined;
  readonly #kv: EtcdKv;
  readonly #ownsClient: boolean;
  readonly #sessions = new Set<EtcdSession>();
  #closed = false;

  /** Throws `ConfigError` for bad options, before any I/O. */
  constructor(options: EtcdBackendOptions) {
    const resolved = resolveEtcdOptions(options);
    this.prefix = resolved.prefix;
    this.endpoint = resolved.endpoint;
    this.#kv = new EtcdKv(resolved.client, resolved.requestTimeoutMs);
    this.#ownsClient = resolved.ownsClient;
  }

  /**
   * Grants a lease of `ttlMs` (whole seconds, at least 2 s: anything else is a `ConfigError`).
   * The session's `ttlMs` is the TTL etcd granted.
   */
  async openSession(options: OpenSessionOptions): Promise<BackendSession> {
    const seconds = leaseSeconds(options.ttlMs);
    if (options.signal?.aborted) throw options.signal.reason;
    if (this.#closed) throw new BackendUnavailableError(this.#closedMessage());
    const lease = await boundedCall(this.#kv.grantLease(seconds), {
      signal: options.signal,
      // Given up on: a lease granted after all is revoked, not left to expire.
      onAbandoned: (late) => {
        void late.then((l) => this.#kv.revokeLease(l.id)).catch(() => undefined);
      },
    });
    if (this.#closed) {
      await this.#kv.revokeLease(lease.id).catch(() => undefined);
      throw new BackendUnavailableError(this.#closedMessage());
    }
    const session = new EtcdSession({
      kv: this.#kv,
      prefix: this.prefix,
      ownerId: options.ownerId,
      leaseId: lease.id,
      leaseHex: leaseHex(lease.id),
      ttlMs: lease.ttlSeconds * 1000,
      onClose: (s) => this.#sessions.delete(s),
    });
    this.#sessions.add(session);
    return session;
  }

  #closedMessage(): string {
    return `this etcd backend (etcd at ${this.#kv.members}) is closed; create a new one to reach etcd again`;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    try {
      await Promise.allSettled([...this.#sessions].map((s) => s.close()));
    } finally {
      if (this.#ownsClient) this.#kv.client.close();
    }
  }
}
