import { randomBytes } from "node:crypto";
import type { StoredRecord } from "@baton/core";
import type { Client, Stat } from "node-zookeeper-client";
import {
  createPersistentWithChild,
  getChildrenAndStat,
  getData,
  mkdirp,
  setData,
  setDataIfExists,
} from "./client-calls.js";
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

/**
 * The data version of a record node just created with its incarnation child (see
 * `createPersistentWithChild`).
 */
const FIRST_VERSION = 1;

/** The highest data version ZooKeeper keeps (a signed 32-bit counter). */
const MAX_VERSION = 2 ** 31 - 1;

/** How often a create is retried after ZooKeeper says the records root is missing. */
const ROOT_CREATES = 3;

/** The name of a record node's incarnation child: this, then 16 hex digits. */
const INCARNATION = "incarnation-";

/** How often a read is repeated when the node changed between its two reads. */
const READ_ROUNDS = 3;

/**
 * Durable records in ZooKeeper: one PERSISTENT node per record under the records root (see
 * zookeeper-keys.ts), its data the value. They never expire and outlive the session that
 * wrote them.
 *
 * A node's data version starts again when it is deleted and created again, so it alone
 * cannot tell a record from the one that replaced it. Each record node is therefore created
 * (in one multi, at data version 1) with an empty child `incarnation-<16 random hex digits>`,
 * and a record's version is `<data version>.<those digits>`. A write is one multi: a create
 * of the node and its child when no record is expected, else a check that the child still
 * exists and a `setData` with the data version. A record deleted and created again has
 * another child, so a write expecting a version from before never lands on it. A node
 * without such a child (a record written by an older release) has the data version alone as
 * its version, written with a plain `setData` after a read that finds the node still without
 * one.
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
    // No node has a version that is not one of ours (-1, "any version", included).
    if (version === undefined) return null;
    const path = recordPath(this.#root, key);
    const data = Buffer.from(value, "utf8");
    const incarnation = version === null ? randomBytes(8).toString("hex") : version.incarnation;
    try {
      return version === null
        ? await this.#create(path, data, incarnation as string)
        : await this.#update(path, data, version);
    } catch (error) {
      const context = `zookeeper record write of "${key}"`;
      if (!isConnectionLoss(error)) throw toBatonError(error, context, this.#calls.ensemble);
      const ours = formatVersion(version === null ? FIRST_VERSION : version.data + 1, incarnation);
      if (await this.#holds(path, value, ours).catch(() => false)) return ours;
      throw toBatonError(error, context, this.#calls.ensemble);
    }
  }

  /**
   * The node's value and version: its data and its children, read together; read again when
   * the node was replaced between the two (their stats name another creation).
   */
  async #node(path: string): Promise<StoredRecord | null> {
    const { client } = this.#calls;
    for (let round = 1; ; round++) {
      // Sent together: ZooKeeper answers a session's requests in order.
      const reading = this.#calls.call("zookeeper read of a record", getData(client, path));
      const listing = this.#calls.call(
        "zookeeper read of a record's children",
        getChildrenAndStat(client, path),
      );
      listing.catch(() => undefined);
      let read: { data: Buffer; stat: Stat };
      try {
        read = await reading;
      } catch (error) {
        if (zkCode(error) === ZK_CODE.noNode) return null;
        throw error;
      }
      const listed = await listing.catch((error: unknown) => {
        // Deleted between the two reads: read again.
        if (zkCode(error) === ZK_CODE.noNode) return undefined;
        throw error;
      });
      if (listed === undefined || !listed.stat.czxid.equals(read.stat.czxid)) {
        if (round < READ_ROUNDS) continue;
        throw new Error(`the record node ${path} was replaced under each of ${READ_ROUNDS} reads`);
      }
      const incarnation = listed.children
        .filter((child) => INCARNATION_NAME.test(child))
        .sort()[0]
        ?.slice(INCARNATION.length);
      return {
        value: (read.data ?? Buffer.alloc(0)).toString("utf8"),
        version: formatVersion(read.stat.version, incarnation),
      };
    }
  }

  /**
   * Creates the record's node with its incarnation child (and, when missing, the records
   * root, persistent).
   */
  async #create(path: string, data: Buffer, incarnation: string): Promise<string | null> {
    for (let round = 0; ; round++) {
      try {
        await this.#calls.call(
          "zookeeper create of a record",
          createPersistentWithChild(this.#calls.client, path, data, `${INCARNATION}${incarnation}`),
        );
        return formatVersion(FIRST_VERSION, incarnation);
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

  async #update(path: string, data: Buffer, version: ParsedVersion): Promise<string | null> {
    const { client } = this.#calls;
    if (version.incarnation === undefined) {
      // A version of a record without an incarnation: refused when the node now has one (it
      // was created again since), else only the data version can be compared.
      const node = await this.#node(path);
      if (node === null || node.version !== formatVersion(version.data, undefined)) return null;
    }
    try {
      const stat = await this.#calls.call(
        "zookeeper update of a record",
        version.incarnation === undefined
          ? setData(client, path, data, version.data)
          : setDataIfExists(
              client,
              `${path}/${INCARNATION}${version.incarnation}`,
              path,
              data,
              version.data,
            ),
      );
      return formatVersion(stat.version, version.incarnation);
    } catch (error) {
      const code = zkCode(error);
      if (code === ZK_CODE.badVersion || code === ZK_CODE.noNode) return null;
      throw error;
    }
  }

  /** Whether, once connected again, the node holds exactly `value` at `version`. */
  async #holds(path: string, value: string, version: string): Promise<boolean> {
    await this.#calls.reconnected();
    const node = await this.#node(path);
    return node !== null && node.version === version && node.value === value;
  }
}

/** The name of an incarnation child. */
const INCARNATION_NAME = /^incarnation-[0-9a-f]{16}$/;

/** A record version: the node's data version, and its incarnation when it has one. */
interface ParsedVersion {
  readonly data: number;
  readonly incarnation: string | undefined;
}

/** A record version as {@link ZookeeperRecords} hands it out. */
function formatVersion(data: number, incarnation: string | undefined): string {
  return incarnation === undefined ? String(data) : `${data}.${incarnation}`;
}

/** A record version as {@link formatVersion} writes it, or `undefined` for any other string. */
function parseVersion(version: string): ParsedVersion | undefined {
  const match = /^(0|[1-9]\d{0,9})(?:\.([0-9a-f]{16}))?$/.exec(version);
  if (match === null) return undefined;
  const data = Number(match[1]);
  const incarnation = match[2];
  // A node with an incarnation child starts at data version 1.
  if (data > MAX_VERSION || (incarnation !== undefined && data < FIRST_VERSION)) return undefined;
  return { data, incarnation };
}
