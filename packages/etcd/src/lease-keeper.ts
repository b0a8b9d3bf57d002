import { BackendUnavailableError, boundedCall, SessionLostError } from "@baton/core";
import type { IDuplexStream, ILeaseKeepAliveRequest, ILeaseKeepAliveResponse } from "etcd3";
import { decodeTtlSeconds } from "./etcd-codec.js";
import { type EtcdKv, endStream } from "./etcd-kv.js";

type KeepAliveStream = IDuplexStream<ILeaseKeepAliveRequest, ILeaseKeepAliveResponse>;

interface Pending {
  resolve(ttlSeconds: number): void;
  reject(error: Error): void;
  /** Streams this renewal may still open after one failed before answering. */
  retriesLeft: number;
}

/**
 * Streams one renewal may open after a stream to a member fails (a member that is down
 * refuses at once): the client picks members at random, so a few picks reach a live one.
 */
const STREAM_RETRIES = 4;
/** Pause before opening another stream, so a client that reaches no member does not spin. */
const STREAM_RETRY_PAUSE_MS = 25;

/**
 * Renews one lease over a LeaseKeepAlive stream, one request and its answer per `renew()`.
 * It runs no loop of its own (core owns the schedule and the local deadline) and never
 * relies on etcd3's `lost` event. A stream that fails before answering (its member died or
 * refused the connection) is dropped and the renewal goes out again on a new stream, which
 * the client opens on a member picked at random, within the same bound; a stream that does
 * not answer in time is dropped and reopened by the next `renew()`.
 */
export class LeaseKeeper {
  readonly #kv: EtcdKv;
  readonly #leaseId: string;
  readonly #timeoutMs: number;
  /** What a renewal that times out was doing, for its error. */
  readonly #what: string;
  #stream: KeepAliveStream | undefined;
  #pending: Pending | undefined;
  #closed = false;

  constructor(kv: EtcdKv, leaseId: string, timeoutMs: number) {
    this.#kv = kv;
    this.#leaseId = leaseId;
    this.#timeoutMs = timeoutMs;
    this.#what = kv.context("renewing the etcd lease");
  }

  /**
   * One keepalive round trip. Resolves the TTL etcd reset the lease to; throws
   * `SessionLostError` when the lease is gone, `BackendUnavailableError` when no member
   * answered within the timeout.
   */
  async renew(): Promise<number> {
    if (this.#closed) throw new SessionLostError("the etcd session is closed");
    if (this.#pending !== undefined)
      throw new Error("baton etcd: a keepalive is already in flight");
    const answer = new Promise<number>((resolve, reject) => {
      this.#pending = {
        retriesLeft: STREAM_RETRIES,
        resolve: (ttl) => {
          this.#pending = undefined;
          resolve(ttl);
        },
        reject: (error) => {
          this.#pending = undefined;
          reject(error);
        },
      };
    });
    this.#sendOrFail();
    const ttl = await boundedCall(answer, {
      timeoutMs: this.#timeoutMs,
      what: this.#what,
      // No answer in time: the stream is dropped (the next renewal opens another) and a late
      // answer on it is ignored.
      onAbandoned: () => {
        this.#pending = undefined;
        this.#dropStream();
      },
    });
    if (ttl <= 0) throw new SessionLostError("the etcd lease expired or was revoked");
    return ttl;
  }

  /** Ends the stream; later renewals fail with `SessionLostError`. */
  close(): void {
    this.#closed = true;
    this.#drop(new SessionLostError("the etcd session is closed"));
  }

  #sendOrFail(): void {
    this.#send().catch((error: unknown) => {
      this.#drop(this.#kv.fail(error, "could not open an etcd keepalive stream"));
    });
  }

  async #send(): Promise<void> {
    let stream = this.#stream;
    if (stream === undefined) {
      const opened = await this.#kv.client.leaseClient.leaseKeepAlive();
      if (this.#pending === undefined || this.#closed) {
        endStream(opened);
        return;
      }
      stream = opened;
      this.#stream = stream;
      stream.on("data", (response: ILeaseKeepAliveResponse) => {
        if (this.#stream === stream) this.#pending?.resolve(decodeTtlSeconds(response.TTL));
      });
      stream.on("error", (error: Error) => {
        if (this.#stream === stream)
          this.#drop(this.#kv.fail(error, "the etcd keepalive stream failed"));
      });
      stream.on("end", () => {
        if (this.#stream === stream)
          this.#drop(this.#kv.unavailable("the etcd keepalive stream ended"));
      });
    }
    stream.write({ ID: this.#leaseId });
  }

  /**
   * Drops the stream and fails the pending renewal (if any) with `error`, unless the store was
   * unavailable and the renewal may try again on a new stream (maybe on another member).
   */
  #drop(error: Error): void {
    this.#dropStream();
    const pending = this.#pending;
    if (pending === undefined) return;
    if (this.#closed || !(error instanceof BackendUnavailableError) || pending.retriesLeft <= 0) {
      pending.reject(error);
      return;
    }
    pending.retriesLeft--;
    setTimeout(() => {
      // Not if the renewal settled meanwhile (it timed out, or the keeper closed).
      if (this.#pending === pending && !this.#closed) this.#sendOrFail();
    }, STREAM_RETRY_PAUSE_MS);
  }

  #dropStream(): void {
    const stream = this.#stream;
    this.#stream = undefined;
    if (stream !== undefined) endStream(stream);
  }
}
