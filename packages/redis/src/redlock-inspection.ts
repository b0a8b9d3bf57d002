import type { ForceReleaseOptions, Holder, KeyPage, KeyState, ListKeysOptions } from "@baton/core";
import { BackendUnavailableError } from "@baton/core";
import type { Redis } from "ioredis";
import { askNodes, failures } from "./ask-nodes.js";
import type { RedisClient } from "./redis-client.js";
import { decodeForceReleased, decodeHolderReply, decodePayload, FIELD_END } from "./redis-codec.js";
import { toBatonError } from "./redis-errors.js";
import { boundListing, listPage } from "./redis-inspection.js";
import { keySpaceLayout, lockKeys } from "./redis-keys.js";
import { type ScanTarget, scanTargets } from "./scan-targets.js";
import { FORCE_RELEASE_ONE, READ_HOLDER } from "./scripts.js";
import { whenReady } from "./when-ready.js";

/** What inspection and forced release need from a Redlock session. */
export interface RedlockInspectionContext {
  readonly nodes: readonly Redis[];
  /** Each node's `host:port`, for messages. */
  readonly addresses: readonly string[];
  readonly keyPrefix: string;
  readonly nodeTimeoutMs: number;
  /** Nodes that must agree. */
  readonly quorum: number;
  /** The session's TTL: a revocation is kept at least three of them. */
  readonly ttlMs: number;
}

/**
 * Inspection and forced release over Redlock's independent nodes. Only locks exist there (no
 * permit keys, no records). A listing walks the nodes in order with SCAN and gives each name
 * once: a key of node k is left out when an earlier node has it too, so a listing needs every
 * node: it waits up to the node timeout for a node still connecting (a session opens once a
 * quorum is connected) and fails naming a node that cannot be reached. A lock's holder is the
 * one a quorum of nodes names (as `holder()` reads it); a forced release reads that holder's
 * grant, then frees exactly that grant on every node that has it, keeping the reason there
 * for the holder's renewal. Redlock grants carry no token (all `0n`): the grant is named by
 * the quorum's payload, read just before, so a later grant is never freed.
 */
export class RedlockInspection {
  readonly #ctx: RedlockInspectionContext;

  constructor(ctx: RedlockInspectionContext) {
    this.#ctx = ctx;
  }

  async listKeys(options: ListKeysOptions): Promise<KeyPage> {
    if (options.space !== "lock") return { keys: [] };
    const ctx = this.#ctx;
    const layout = keySpaceLayout(ctx.keyPrefix, "lock", options.prefix);
    const call = boundListing("redlock", ctx.nodeTimeoutMs, options);
    // Every error names the node it came from.
    const atNode = <T>(i: number, what: Promise<T>): Promise<T> =>
      what.catch((error: unknown) => {
        throw toBatonError(
          error,
          `redlock: listing of the lock keys failed at node ${ctx.addresses[i]}`,
        );
      });
    await Promise.all(
      ctx.nodes.map((n, i) =>
        whenReady(
          n as unknown as RedisClient,
          ctx.nodeTimeoutMs,
          `redlock: listing of the lock keys needs every node; node ${ctx.addresses[i]}`,
          options.signal,
        ),
      ),
    );
    const targets = (
      await Promise.all(
        ctx.nodes.map(async (n, i) =>
          (
            await scanTargets(n as unknown as RedisClient, false)
          ).map(
            (t): ScanTarget => ({
              address: t.address,
              scan: (cursor, pattern, count) => atNode(i, t.scan(cursor, pattern, count)),
            }),
          ),
        ),
      )
    ).flat();
    return await listPage(targets, layout, options, call, async (batch, node) => {
      const names: string[] = [];
      for (const key of batch) {
        const name = layout.nameOf(key);
        if (name === undefined || key !== lockKeys(ctx.keyPrefix, name).lock) continue;
        // Listed by the first node that has it.
        const earlier = await call(
          Promise.all(
            ctx.nodes
              .slice(0, node)
              .map(
                async (n, i) =>
                  decodeHolderReply(await atNode(i, READ_HOLDER.run(n, [key], []))).payload,
              ),
          ),
        );
        if (earlier.every((p) => p === null)) names.push(name);
      }
      return names;
    });
  }

  /**
   * The holder a quorum of nodes names for lock `key`, its lease the time a quorum still keeps
   * it (the quorum-th longest PTTL among them), or `null`. `what` names the read in errors.
   */
  async holder(key: string, what: string): Promise<Holder | null> {
    const held = await this.#quorumHolder(key, what);
    if (held === null) return null;
    const holder = decodePayload(held.payload, false);
    return holder === null || held.remainingMs < 0
      ? holder
      : { ...holder, remainingMs: held.remainingMs };
  }

  async inspectKey(space: "lock" | "permit", key: string): Promise<KeyState | null> {
    if (space !== "lock") return null;
    const holder = await this.holder(key, "inspection");
    return holder === null ? null : { holders: [holder] };
  }

  async forceRelease(
    space: "lock" | "permit",
    key: string,
    options: ForceReleaseOptions,
  ): Promise<boolean> {
    // Redlock grants all carry token 0: no other token names one.
    if (space !== "lock" || options.token !== 0n) return false;
    const ctx = this.#ctx;
    const held = await this.#quorumHolder(key, "forced release");
    if (held === null) return false;
    const grant = held.payload.slice(0, held.payload.indexOf(FIELD_END) + 1);
    const keys = lockKeys(ctx.keyPrefix, key);
    const answers = await askNodes(
      ctx.nodes,
      (node) =>
        FORCE_RELEASE_ONE.run(
          node,
          [keys.lock, keys.revoked],
          [grant, options.reason, 3 * ctx.ttlMs, keys.channel],
        ).then(decodeForceReleased),
      { timeoutMs: ctx.nodeTimeoutMs, names: ctx.addresses },
    );
    const freed = answers.filter((a) => a.state === "ok" && a.value).length;
    if (freed > 0) return true;
    const answered = answers.filter((a) => a.state === "ok").length;
    if (answered < ctx.quorum) {
      throw new BackendUnavailableError(
        `redlock forced release of "${key}" failed: only ${answered} of ${answers.length} nodes answered${listFailures(answers)}`,
      );
    }
    return false;
  }

  /**
   * The payload a quorum of nodes holds for `key`, with the time a quorum still keeps it, or
   * `null`; `BackendUnavailableError` when fewer than a quorum answer.
   */
  async #quorumHolder(
    key: string,
    what: string,
  ): Promise<{ payload: string; remainingMs: number } | null> {
    const ctx = this.#ctx;
    const lock = lockKeys(ctx.keyPrefix, key).lock;
    const answers = await askNodes(
      ctx.nodes,
      (node) => READ_HOLDER.run(node, [lock], []).then(decodeHolderReply),
      { timeoutMs: ctx.nodeTimeoutMs, names: ctx.addresses },
    );
    const answered = answers.filter((a) => a.state === "ok") as {
      value: { payload: string | null; pttl: number };
    }[];
    if (answered.length < ctx.quorum) {
      throw new BackendUnavailableError(
        `redlock ${what} of "${key}" failed: only ${answered.length} of ${answers.length} nodes answered${listFailures(answers)}`,
      );
    }
    const votes = new Map<string, number[]>();
    for (const { value } of answered) {
      if (value.payload === null) continue;
      const pttls = votes.get(value.payload) ?? [];
      pttls.push(value.pttl);
      votes.set(value.payload, pttls);
    }
    for (const [payload, pttls] of votes) {
      if (pttls.length < ctx.quorum) continue;
      return { payload, remainingMs: pttls.sort((a, b) => b - a)[ctx.quorum - 1] as number };
    }
    return null;
  }
}

function listFailures(answers: Parameters<typeof failures>[0]): string {
  const text = failures(answers);
  return text === "" ? "" : ` (${text})`;
}
