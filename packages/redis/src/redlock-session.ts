import { randomBytes } from "node:crypto";
import type {
  BackendAcquireOptions,
  BackendSession,
  ForceReleaseOptions,
  Grant,
  Holder,
  KeepAliveResult,
  KeyPage,
  KeyState,
  ListKeysOptions,
  RevokedGrant,
} from "@baton/core";
import {
  BackendUnavailableError,
  defaultDriftMs,
  linkSignals,
  NameTable,
  SessionLostError,
  sleep,
  systemClock,
} from "@baton/core";
import type { Redis } from "ioredis";
import { askNodes, count, failures, type NodeAnswer } from "./ask-nodes.js";
import {
  decodeNodeAcquireReply,
  decodeReleasedOne,
  decodeRenewals,
  encodePayload,
  grantPrefix,
  type KeyRenewal,
  ownerPrefix,
  payloadTail,
} from "./redis-codec.js";
import { type LockKeys, lockKeys } from "./redis-keys.js";
import { RedlockInspection } from "./redlock-inspection.js";
import { ACQUIRE_NO_TOKEN, RELEASE_ONE, RENEW } from "./scripts.js";

/** What a {@link RedlockSession} needs from its backend. */
export interface RedlockSessionContext {
  readonly nodes: readonly Redis[];
  /** Each node's `host:port`, for messages (never credentials). */
  readonly addresses: readonly string[];
  readonly keyPrefix: string;
  readonly nodeTimeoutMs: number;
  readonly retryMinMs: number;
  readonly retryMaxMs: number;
  readonly onClose: (session: RedlockSession) => void;
}

interface HeldKey {
  readonly keys: LockKeys;
  readonly prefix: string;
  readonly grant: Grant;
}

interface RedlockGrantHandle {
  readonly sessionId: string;
  readonly prefix: string;
}

/**
 * A session over N independent Redis nodes. A grant needs `floor(N/2)+1` nodes to say yes
 * within its validity (`ttl - elapsed - drift`, on the monotonic clock); so does every
 * renewal. Tokens are always `0n`: Redlock has no fencing token.
 */
export class RedlockSession implements BackendSession {
  readonly ownerId: string;
  readonly ttlMs: number;
  /** Random id of this session, the first part of every payload it writes. */
  readonly sessionId: string;
  /** Nodes that must agree. */
  readonly quorum: number;
  readonly #ctx: RedlockSessionContext;
  readonly #driftMs: number;
  readonly #held = new NameTable<HeldKey>();
  readonly #pending = new NameTable<LockKeys>();
  /** Acquires in progress: a closing session aborts them. */
  readonly #waits = new Set<{ abort(reason: unknown): void }>();
  #grants = 0;
  /** Listing, inspection and forced release for operators. */
  readonly #inspection: RedlockInspection;
  #closed = false;

  constructor(ctx: RedlockSessionContext, ownerId: string, ttlMs: number) {
    this.#ctx = ctx;
    this.ownerId = ownerId;
    this.ttlMs = ttlMs;
    this.sessionId = randomBytes(12).toString("hex");
    this.quorum = Math.floor(ctx.nodes.length / 2) + 1;
    this.#driftMs = defaultDriftMs(ttlMs);
    this.#inspection = new RedlockInspection({ ...ctx, quorum: this.quorum, ttlMs });
  }

  async acquire(name: string, options: BackendAcquireOptions): Promise<Grant | null> {
    this.#assertLive();
    const keys = lockKeys(this.#ctx.keyPrefix, name);
    const tail = payloadTail(this.ownerId, options.value);
    // The first round reads no signal: the contract has a backend read it only when it is
    // about to wait (core counts that read as contention). Core bounds this round itself,
    // and releases a grant that comes after it gave up.
    const first = await this.#round(name, keys, tail);
    if (this.#closed) {
      if (first.grant !== undefined) await this.#releaseEverywhere(keys, first.grant.prefix);
      throw new SessionLostError("this redlock session was closed");
    }
    if (first.grant !== undefined) {
      const { grant, prefix } = first.grant;
      this.#held.set(name, { keys, prefix, grant });
      return grant;
    }
    if (first.unavailable !== undefined) throw first.unavailable;
    if (!options.wait) return null;
    if (options.signal.aborted) throw options.signal.reason;
    const link = linkSignals([options.signal]);
    this.#waits.add(link);
    try {
      await sleep(systemClock, this.#retryDelay(), link.signal);
      return await this.#acquire(name, keys, tail, link.signal);
    } finally {
      link.dispose();
      this.#waits.delete(link);
    }
  }

  /** The rounds of a wait, until a grant, a failure or the signal's end. */
  async #acquire(
    name: string,
    keys: LockKeys,
    tail: string,
    signal: AbortSignal,
  ): Promise<Grant | null> {
    for (;;) {
      const outcome = await this.#round(name, keys, tail);
      if (signal.aborted) {
        if (outcome.grant !== undefined) await this.#releaseEverywhere(keys, outcome.grant.prefix);
        throw signal.reason;
      }
      if (outcome.grant !== undefined) {
        const { grant, prefix } = outcome.grant;
        this.#held.set(name, { keys, prefix, grant });
        return grant;
      }
      if (outcome.unavailable !== undefined) throw outcome.unavailable;
      await sleep(systemClock, this.#retryDelay(), signal);
    }
  }

  /**
   * One Redlock round: SET NX PX on every node in parallel; granted when a quorum said yes
   * and validity remains. Any failed round is released on every node (a minority that said
   * yes, and nodes that timed out and may have applied it) before it returns.
   */
  async #round(
    name: string,
    keys: LockKeys,
    tail: string,
  ): Promise<{
    grant?: { grant: Grant; prefix: string };
    unavailable?: BackendUnavailableError;
  }> {
    this.#grants += 1;
    const grantId = this.#grants;
    const prefix = grantPrefix(this.sessionId, grantId);
    const payload = encodePayload(this.sessionId, grantId, tail);
    const started = performance.now();
    const nodes = this.#ctx.nodes;
    const quorum = this.quorum;
    this.#pending.set(name, keys);
    let answers: NodeAnswer<"granted" | "held" | undefined>[];
    try {
      answers = await askNodes(
        nodes,
        (node) =>
          ACQUIRE_NO_TOKEN.run(node, [keys.lock], [payload, this.ttlMs]).then(
            decodeNodeAcquireReply,
          ),
        {
          timeoutMs: this.#ctx.nodeTimeoutMs,
          names: this.#ctx.addresses,
          // Decided once a quorum said yes; once too many said "held" for a quorum of yes
          // (held); or once too many failed for a quorum to answer at all (unavailable).
          // Failures alone never end the round early while the rest could still say "held":
          // "held" and "unreachable" must not be confused.
          enough: (a) => {
            const yes = count(a, (x) => x.state === "ok" && x.value === "granted");
            const held = count(a, (x) => x.state === "ok" && x.value === "held");
            const failed = count(a, (x) => x.state === "failed");
            const spare = nodes.length - quorum;
            return yes >= quorum || held > spare || failed > spare;
          },
        },
      );
    } finally {
      this.#pending.delete(name);
    }
    const yes = count(answers, (a) => a.state === "ok" && a.value === "granted");
    const held = count(answers, (a) => a.state === "ok" && a.value === "held");
    const validity = this.ttlMs - (performance.now() - started) - this.#driftMs;
    if (yes >= quorum && validity > 0) {
      const handle: RedlockGrantHandle = { sessionId: this.sessionId, prefix };
      return { grant: { grant: { key: name, ownerId: this.ownerId, token: 0n, handle }, prefix } };
    }
    await this.#releaseEverywhere(keys, prefix);
    if (yes >= quorum) {
      return {
        unavailable: new BackendUnavailableError(
          `redlock acquire of "${name}": a quorum answered, but only after the lock's validity ran out (${Math.round(performance.now() - started)} ms for a ${this.ttlMs} ms TTL)`,
        ),
      };
    }
    if (yes + held >= quorum) return {};
    const failed = answers.filter((a) => a.state === "failed") as { error: unknown }[];
    return {
      unavailable: new BackendUnavailableError(
        `redlock acquire of "${name}" failed: only ${yes + held} of ${nodes.length} nodes answered, a quorum is ${quorum}${failedNodes(answers)}`,
        { cause: failed[0]?.error },
      ),
    };
  }

  async keepAlive(): Promise<KeepAliveResult | undefined> {
    this.#assertLive();
    const held = [...this.#held.entries()];
    const items = [
      ...held.map(([, h]) => ({ keys: h.keys, prefix: h.prefix })),
      ...[...this.#pending.values()].map((keys) => ({
        keys,
        prefix: ownerPrefix(this.sessionId),
      })),
    ];
    if (items.length === 0) return undefined;
    const started = performance.now();
    const answers = await askNodes(
      this.#ctx.nodes,
      (node) =>
        RENEW.run(
          node,
          items.map((i) => i.keys.lock),
          [this.ttlMs, ...items.map((i) => i.prefix)],
        ).then(decodeRenewals),
      { timeoutMs: this.#ctx.nodeTimeoutMs, names: this.#ctx.addresses },
    );
    const answered = answers.filter((a) => a.state === "ok") as { value: KeyRenewal[] }[];
    if (answered.length < this.quorum) {
      throw new BackendUnavailableError(
        `redlock renewal failed: only ${answered.length} of ${answers.length} nodes answered, a quorum is ${this.quorum}${failedNodes(answers)}`,
      );
    }
    const validity = this.ttlMs - (performance.now() - started) - this.#driftMs;
    if (validity <= 0) {
      throw new BackendUnavailableError(
        "redlock renewal: the nodes answered only after the lease's validity ran out",
      );
    }
    const lostKeys: string[] = [];
    const revoked: RevokedGrant[] = [];
    held.forEach(([name, h], i) => {
      const yes = answered.filter((a) => a.value[i]?.renewed === true).length;
      if (yes >= this.quorum) return;
      if (this.#held.get(name) !== h) return;
      this.#held.delete(name);
      // An operator's forced release: the nodes it freed keep the reason.
      const reason = answered.find((a) => a.value[i]?.reason !== undefined)?.value[i]?.reason;
      if (reason === undefined) lostKeys.push(name);
      else revoked.push({ space: "lock", key: name, token: h.grant.token, reason });
      // A minority may still hold it for us: free them, so others need not wait the TTL out.
      void this.#releaseEverywhere(h.keys, h.prefix);
    });
    if (lostKeys.length === 0 && revoked.length === 0) return undefined;
    return {
      ...(lostKeys.length === 0 ? {} : { lostKeys }),
      ...(revoked.length === 0 ? {} : { revoked }),
    };
  }

  async release(grant: Grant): Promise<boolean> {
    const held = this.#held.get(grant.key);
    if (held?.grant === grant) this.#held.delete(grant.key);
    const handle = grant.handle as RedlockGrantHandle | undefined;
    if (handle?.sessionId !== this.sessionId) return false;
    const keys = held?.keys ?? lockKeys(this.#ctx.keyPrefix, grant.key);
    const answers = await askNodes(
      this.#ctx.nodes,
      (node) =>
        RELEASE_ONE.run(node, [keys.lock], [handle.prefix, keys.channel]).then(decodeReleasedOne),
      {
        timeoutMs: this.#ctx.nodeTimeoutMs,
        names: this.#ctx.addresses,
      },
    );
    const answered = answers.filter((a) => a.state === "ok") as { value: boolean }[];
    const released = answered.filter((a) => a.value).length;
    if (released >= this.quorum) return true;
    if (answered.length < this.quorum) {
      throw new BackendUnavailableError(
        `redlock release of "${grant.key}" failed: only ${answered.length} of ${answers.length} nodes answered; the rest expire within the TTL${failedNodes(answers)}`,
      );
    }
    return false;
  }

  /** The holder a quorum of nodes names, with the time a quorum still keeps its lease. */
  async holder(name: string): Promise<Holder | null> {
    return await this.#inspection.holder(name, "holder");
  }

  /** Lists the lock keys under the backend's prefix, each once (see redlock-inspection.ts). */
  async listKeys(options: ListKeysOptions): Promise<KeyPage> {
    this.#assertLive();
    return await this.#inspection.listKeys(options);
  }

  /** The holder a quorum of nodes names for a lock, or `null`. */
  async inspectKey(space: "lock" | "permit", key: string): Promise<KeyState | null> {
    this.#assertLive();
    return await this.#inspection.inspectKey(space, key);
  }

  /** Frees the grant a quorum holds for `key` on every node; `false` when none. */
  async forceRelease(
    space: "lock" | "permit",
    key: string,
    options: ForceReleaseOptions,
  ): Promise<boolean> {
    this.#assertLive();
    return await this.#inspection.forceRelease(space, key, options);
  }

  /** Throws `SessionLostError` once the session is closed. */
  #assertLive(): void {
    if (this.#closed) throw new SessionLostError("this redlock session is closed");
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const wait of this.#waits)
      wait.abort(new SessionLostError("this redlock session was closed"));
    this.#waits.clear();
    const held = [...this.#held.values()];
    this.#held.clear();
    this.#ctx.onClose(this);
    await Promise.all(held.map((h) => this.#releaseEverywhere(h.keys, h.prefix)));
  }

  /** Owner-checked delete on every node; waits for each to answer or time out. */
  async #releaseEverywhere(keys: LockKeys, prefix: string): Promise<void> {
    await askNodes(
      this.#ctx.nodes,
      (node) => RELEASE_ONE.run(node, [keys.lock], [prefix, keys.channel]),
      { timeoutMs: this.#ctx.nodeTimeoutMs, names: this.#ctx.addresses },
    );
  }

  #retryDelay(): number {
    const { retryMinMs, retryMaxMs } = this.#ctx;
    return retryMinMs + Math.random() * (retryMaxMs - retryMinMs);
  }
}

/** ` (node <host:port>: <why>; ...)` for the nodes that failed, or nothing. */
function failedNodes<T>(answers: readonly NodeAnswer<T>[]): string {
  const text = failures(answers);
  return text === "" ? "" : ` (${text})`;
}
