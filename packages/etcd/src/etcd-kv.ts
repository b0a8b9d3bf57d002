import type { BackendUnavailableError, BatonError } from "@baton/core";
import type { Etcd3, IKeyValue, IRangeRequest, ITxnRequest, ITxnResponse } from "etcd3";
import type { EtcdClient } from "./etcd-client.js";
import { decodeRevision, decodeTtlSeconds } from "./etcd-codec.js";
import { etcdContext, etcdUnavailable, membersOf, toBatonError } from "./etcd-errors.js";

/**
 * The etcd calls the adapter makes, each bounded by a gRPC deadline (so a member that never
 * answers cannot hang a call) and with errors mapped to Baton's named errors, which name the
 * members the client talks to.
 */
export class EtcdKv {
  /** The etcd3 client underneath, with the types of the etcd3 package it was built with. */
  readonly client: Etcd3;
  /** Bound on every unary call, in ms. */
  readonly requestTimeoutMs: number;
  /** The members the client talks to, for messages (never with credentials). */
  readonly members: string;

  constructor(client: EtcdClient, requestTimeoutMs: number) {
    // The options checked the shape; the calls below are those of the etcd3 package.
    this.client = client as unknown as Etcd3;
    this.requestTimeoutMs = requestTimeoutMs;
    this.members = membersOf(client);
  }

  /** `what` was being done, and the members it went to: the context of an error. */
  context(what: string): string {
    return etcdContext(what, this.members);
  }

  /** Baton's error for `error`, met while doing `what` (see `toBatonError`). */
  fail(error: unknown, what: string): BatonError {
    return toBatonError(error, this.context(what));
  }

  /** A `BackendUnavailableError` for `what` (no client error behind it), naming the members. */
  unavailable(what: string): BackendUnavailableError {
    return etcdUnavailable(this.context(what));
  }

  /** One transaction. */
  async txn(request: ITxnRequest, what: string): Promise<ITxnResponse> {
    try {
      return await this.client.kv.txn(request, { deadline: this.#deadline() });
    } catch (error) {
      throw this.fail(error, what);
    }
  }

  /**
   * One range read (linearizable): the keys read, the read's revision, whether more keys lie
   * in the range past a `limit`, and how many keys the whole range holds.
   */
  async range(
    request: IRangeRequest,
    what: string,
  ): Promise<{ kvs: IKeyValue[]; revision: bigint; more: boolean; count: number }> {
    try {
      const response = await this.client.kv.range(request, { deadline: this.#deadline() });
      return {
        kvs: response.kvs,
        revision: decodeRevision(response.header.revision),
        more: response.more === true,
        // proto3 leaves a zero out.
        count: Number(response.count || "0"),
      };
    } catch (error) {
      throw this.fail(error, what);
    }
  }

  /** Grants a lease of `seconds`; resolves its id and the TTL etcd granted. */
  async grantLease(seconds: number): Promise<{ id: string; ttlSeconds: number }> {
    try {
      const response = await this.client.leaseClient.leaseGrant(
        { TTL: seconds, ID: 0 },
        { deadline: this.#deadline() },
      );
      if (response.error) throw new Error(response.error);
      return { id: response.ID, ttlSeconds: decodeTtlSeconds(response.TTL) };
    } catch (error) {
      throw this.fail(error, "could not grant an etcd lease");
    }
  }

  /**
   * Time left on lease `id`, in whole seconds as etcd reports it (the lease ends within one
   * second after that), or `undefined` when the lease is gone.
   */
  async leaseTimeToLive(id: string): Promise<number | undefined> {
    try {
      const response = await this.client.leaseClient.leaseTimeToLive(
        { ID: id },
        { deadline: this.#deadline() },
      );
      const ttl = decodeTtlSeconds(response.TTL);
      return ttl >= 0 ? ttl : undefined;
    } catch (error) {
      throw this.fail(error, "could not read the time left on an etcd lease");
    }
  }

  /** Revokes a lease, deleting every key attached to it. A lease already gone is not an error. */
  async revokeLease(id: string): Promise<void> {
    try {
      await this.client.leaseClient.leaseRevoke({ ID: id }, { deadline: this.#deadline() });
    } catch (error) {
      const mapped = this.fail(error, "could not revoke the etcd lease");
      if (mapped.code === "BATON_SESSION_LOST") return;
      throw mapped;
    }
  }

  /** The deadline of a call starting now, in ms since the epoch (gRPC takes a number). */
  #deadline(): number {
    return Date.now() + this.requestTimeoutMs;
  }
}

/**
 * Ends a gRPC stream quietly. Half-closing first matters: etcd3 marks a member failed (and
 * resets every connection to it) when a stream that is still writable reports an error, and
 * a cancel reports one.
 */
export function endStream(stream: {
  end(): void;
  cancel(): void;
  on(event: "error", fn: (e: Error) => void): unknown;
}): void {
  stream.on("error", () => undefined);
  try {
    stream.end();
    stream.cancel();
  } catch {
    // Already gone.
  }
}
