import type { StoredRecord } from "@baton/core";
import type { Client } from "node-zookeeper-client";
import { createPersistent, getData, mkdirp, setData } from "./client-calls.js";
import { isConnectionLoss, toBatonError, ZK_CODE, zkCode } from "./zookeeper-errors.js";
import { recordPath, recordRoot } from "./zookeeper-keys.js";

/** What the records of a session need from it. */
export interface ZookeeperRecordCalls {
  /** The session's client. */
  readonly client: Client;
  /** The locks root, e.g. `/baton`: the records root is the node beside it. */
  readonly lockRoot: string;
  /** The ensemble members for messages, e.g. `zk1:2181, zk2:2181`; unknown for a given client. */
  readonly ensemble?: string | undefined;
  /** Runs one call, bounded (and stopped when the session ends) like the session's others. */
  call<T>(what: string, pending: Promise<T>): Promise<T>;
  /** Resolves once the client is connected again (bounded); rejects when the session ends. */
  reconnected(): Promise<void>;
  /** One write-path round trip: a read sent right after it is not stale. */
  barrier(): Promise<void>;
}

/** The data version of a node just created. */
const FIRST_VERSION = 0;

/** The highest data version ZooKeeper keeps (a signed 32-bit counter). */
const MAX_VERSION = 2 ** 31 - 1;

/** How often a create is retried after ZooKeeper says the records root is missing. */
const ROOT_CREATES = 3;

/**
 * Durable records in ZooKeeper: one PERSISTENT node per record under the records root (see
 * zookeeper-keys.ts), its data the value, its data version (`stat.version`) the record's
 * version. They never expire and outlive the session that wrote them. A write is one
 * conditional call: a create when no record is expected, else a `setData` with the version.
 */
export class ZookeeperRecords {
  readonly #calls: ZookeeperRecordCalls;
  readonly #root: string;

  constructor(calls: ZookeeperRecordCalls) {
    this.#calls = calls;
    this.#root = recordRoot(calls.lockRoot);
  }

  /** The record `key`, or `null`; read after a leader round trip, so not stale. */
  async read(key: string): Promise<StoredRecord | null> {
    try {
      const barrier = this.#calls.barrier();
      barrier.catch(() => undefined);
      const node = await this.#node(recordPath(this.#root, key));
      await barrier;
      return node;
    } catch (error) {
      throw toBatonError(error, `zookeeper record read of "${key}"`, this.#calls.ensemble);
    }
  }

  /**
   * Writes `value` if the record's version is `expected` (`null`: only if there is none);
   * the new version, or `null` when it did not match. A reply lost with the connection is
   * settled by reading the node once connected again: holding exactly `value` at the version
   * this write would have given it, it is this write (core's values carry the lock's token,
   * so two writers never write the same bytes); otherwise the outcome is unknown and the
   * call fails with a `BackendUnavailableError`.
   */
  async write(key: string, value: string, expected: string | null): Promise<string | null> {
    const version = expected === null ? null : parseVersion(expected);
    // No node has a version that is not one of ZooKeeper's (-1, "any version", included).
    if (version === undefined) return null;
    const path = recordPath(this.#root, key);
    const data = Buffer.from(value, "utf8");
    try {
      return version === null
        ? await this.#create(path, data)
        : await this.#update(path, data, version);
    } catch (error) {
      const context = `zookeeper record write of "${key}"`;
      if (!isConnectionLoss(error)) throw toBatonError(error, context, this.#calls.ensemble);
      const ours = version === null ? FIRST_VERSION : version + 1;
      if (await this.#holds(path, value, ours).catch(() => false)) return String(ours);
      throw toBatonError(error, context, this.#calls.ensemble);
    }
  }

  async #node(path: string): Promise<StoredRecord | null> {
    try {
      const { data, stat } = await this.#calls.call(
        "zookeeper read of a record",
        getData(this.#calls.client, path),
      );
      return { value: (data ?? Buffer.alloc(0)).toString("utf8"), version: String(stat.version) };
    } catch (error) {
      if (zkCode(error) === ZK_CODE.noNode) return null;
      throw error;
    }
  }

  /** Creates the record's node (and, when missing, the records root, persistent). */
  async #create(path: string, data: Buffer): Promise<string | null> {
    for (let round = 0; ; round++) {
      try {
        await this.#calls.call(
          "zookeeper create of a record",
          createPersistent(this.#calls.client, path, data),
        );
        return String(FIRST_VERSION);
      } catch (error) {
        const code = zkCode(error);
        if (code === ZK_CODE.nodeExists) return null;
        if (code !== ZK_CODE.noNode || round >= ROOT_CREATES) throw error;
        await this.#calls.call(
          "zookeeper create of the records root",
          mkdirp(this.#calls.client, this.#root),
        );
      }
    }
  }

  async #update(path: string, data: Buffer, version: number): Promise<string | null> {
    try {
      const stat = await this.#calls.call(
        "zookeeper update of a record",
        setData(this.#calls.client, path, data, version),
      );
      return String(stat.version);
    } catch (error) {
      const code = zkCode(error);
      if (code === ZK_CODE.badVersion || code === ZK_CODE.noNode) return null;
      throw error;
    }
  }

  /** Whether, once connected again, the node holds exactly `value` at `version`. */
  async #holds(path: string, value: string, version: number): Promise<boolean> {
    await this.#calls.reconnected();
    const node = await this.#node(path);
    return node !== null && node.version === String(version) && node.value === value;
  }
}

/** A record version as ZooKeeper keeps it, or `undefined` for a string no node can have. */
function parseVersion(version: string): number | undefined {
  if (!/^(0|[1-9]\d{0,9})$/.test(version)) return undefined;
  const n = Number(version);
  return n <= MAX_VERSION ? n : undefined;
}
