import type { ForceReleaseOptions, KeyPage, KeyState, ListKeysOptions } from "@baton/core";
import { boundedCall, ConfigError } from "@baton/core";
import { FORCE_RELEASE_PERMITS, INSPECT_PERMITS } from "./permit-scripts.js";
import type { RedisClient } from "./redis-client.js";
import {
  decodeForceReleased,
  decodeHolderReply,
  decodeListCursor,
  decodeLockInspection,
  decodePermitInspection,
  encodeListCursor,
  type ListCursor,
} from "./redis-codec.js";
import { toBatonError } from "./redis-errors.js";
import {
  isWaitersKey,
  type KeySpaceLayout,
  keySpaceLayout,
  lockKeyOfWaiters,
  lockKeys,
  permitKeys,
} from "./redis-keys.js";
import { type ScanTarget, scanTargets } from "./scan-targets.js";
import { FORCE_RELEASE, INSPECT_LOCK, READ_HOLDER } from "./scripts.js";

/**
 * One page of a listing over `targets` (walked in order, each with SCAN from the cursor's
 * place): the names `namesOf` finds in each SCAN batch of node `node`, in sorted order, at
 * most `SCAN_CALLS_PER_PAGE` SCAN calls, at most `options.limit` names; the cursor says where
 * the next page starts (see `ListCursor`). `call` bounds each store call.
 */
export async function listPage(
  targets: readonly ScanTarget[],
  layout: KeySpaceLayout,
  options: ListKeysOptions,
  call: <T>(what: Promise<T>) => Promise<T>,
  namesOf: (batch: readonly string[], node: number) => Promise<string[]>,
): Promise<KeyPage> {
  const { limit } = options;
  let at: ListCursor = { node: 0, scan: "0" };
  if (options.cursor !== undefined) {
    const decoded = decodeListCursor(options.cursor);
    if (decoded === undefined) {
      throw new ConfigError("cursor", `is no cursor of this redis backend: "${options.cursor}"`);
    }
    at = decoded;
  }
  const count = Math.max(limit, SCAN_COUNT_MIN);
  const keys: string[] = [];
  let { node, scan, after } = at;
  for (let calls = 0; calls < SCAN_CALLS_PER_PAGE && node < targets.length; calls++) {
    const target = targets[node] as ScanTarget;
    const [next, batch] = await call(target.scan(scan, layout.pattern, count));
    let found = [...new Set(await namesOf(batch, node))].sort();
    if (after !== undefined) {
      const last = after;
      found = found.filter((name) => name > last);
    }
    const room = limit - keys.length;
    if (found.length > room) {
      const given = found.slice(0, room);
      keys.push(...given);
      const lastGiven = given.at(-1) ?? after;
      return {
        keys,
        cursor: encodeListCursor(
          lastGiven === undefined ? { node, scan } : { node, scan, after: lastGiven },
        ),
      };
    }
    keys.push(...found);
    after = undefined;
    if (next === "0") {
      node++;
      scan = "0";
    } else {
      scan = next;
    }
    if (keys.length === limit) break;
  }
  return node < targets.length ? { keys, cursor: encodeListCursor({ node, scan }) } : { keys };
}

/** Bounds each store call of a listing by `timeoutMs` and its signal. */
export function boundListing(
  where: string,
  timeoutMs: number,
  options: ListKeysOptions,
): <T>(what: Promise<T>) => Promise<T> {
  return (what) =>
    boundedCall(what, {
      timeoutMs,
      what: `${where}: listing of the ${options.space} keys`,
      signal: options.signal,
      mapError: (e) => toBatonError(e, `${where}: listing of the ${options.space} keys failed`),
    });
}

/** What inspection and forced release need from a Redis session. */
export interface RedisInspectionContext {
  readonly client: RedisClient;
  /** The store in messages, e.g. `redis 127.0.0.1:6379`. */
  readonly where: string;
  readonly cluster: boolean;
  readonly keyPrefix: string;
  readonly commandTimeoutMs: number;
  /** The session's TTL: a revocation is kept at least three of them. */
  readonly ttlMs: number;
}

/**
 * SCAN calls one page makes at most: a page of a sparse key space may come back short (even
 * empty, with a cursor), but its cost stays bounded.
 */
const SCAN_CALLS_PER_PAGE = 10;
/** The SCAN COUNT hint of a page, at least: a page of a few keys still walks this many. */
const SCAN_COUNT_MIN = 100;
/** Waiters whose owner ids an inspection lists, at most; the count is always exact. */
const WAITERS_LISTED = 100;

/**
 * Inspection and forced release for operators, on one Redis node or a Redis Cluster:
 *
 * - `listKeys` walks the keys with SCAN (`MATCH` on the key space's layout and the name
 *   prefix), master by master on a Cluster (in address order), a bounded number of calls per
 *   page; the cursor says which master, its SCAN cursor, and how many keys of that call's
 *   batch were given already;
 * - `inspectKey` reads a lock (holder, PTTL, its line of waiters) or a permit key (granted
 *   entries, waiting ones, the limit) in one script call;
 * - `forceRelease` frees one grant by token in one script call, as its holder's release would
 *   (the next waiter gets it at once, with the next token), and keeps a revocation with the
 *   reason that the holder's renewal reads when it finds its grant gone.
 */
export class RedisInspection {
  readonly #ctx: RedisInspectionContext;

  constructor(ctx: RedisInspectionContext) {
    this.#ctx = ctx;
  }

  async listKeys(options: ListKeysOptions): Promise<KeyPage> {
    const ctx = this.#ctx;
    const layout = keySpaceLayout(ctx.keyPrefix, options.space, options.prefix);
    const call = boundListing(ctx.where, ctx.commandTimeoutMs, options);
    const targets = await call(scanTargets(ctx.client, ctx.cluster));
    return await listPage(targets, layout, options, call, (batch) =>
      call(this.#namesOf(batch, layout)),
    );
  }

  /**
   * The names the keys of one SCAN batch stand for, in batch order. A lock's line of waiters
   * counts only while the lock key is gone (otherwise the lock is listed by its lock key).
   */
  async #namesOf(batch: readonly string[], layout: KeySpaceLayout): Promise<string[]> {
    const named = batch.map((key) => ({ key, name: layout.nameOf(key) }));
    const kept = await Promise.all(
      named.map(async ({ key, name }) => {
        if (name === undefined) return false;
        if (!isWaitersKey(key)) return true;
        const reply = await READ_HOLDER.run(this.#ctx.client, [lockKeyOfWaiters(key)], []);
        return decodeHolderReply(reply).payload === null;
      }),
    );
    return named.filter((_, i) => kept[i]).map(({ name }) => name as string);
  }

  async inspectKey(space: "lock" | "permit", key: string): Promise<KeyState | null> {
    const ctx = this.#ctx;
    const reply =
      space === "lock"
        ? INSPECT_LOCK.run(
            ctx.client,
            [lockKeys(ctx.keyPrefix, key).lock, lockKeys(ctx.keyPrefix, key).waiters],
            [WAITERS_LISTED],
          )
        : INSPECT_PERMITS.run(ctx.client, permitKeys(ctx.keyPrefix, key).all, [WAITERS_LISTED]);
    const answer = await boundedCall(reply, {
      timeoutMs: ctx.commandTimeoutMs,
      what: `${ctx.where}: inspection`,
      name: key,
      mapError: (e) => toBatonError(e, `${ctx.where}: inspection of "${key}" failed`),
    });
    return space === "lock" ? decodeLockInspection(answer) : decodePermitInspection(answer);
  }

  async forceRelease(
    space: "lock" | "permit",
    key: string,
    options: ForceReleaseOptions,
  ): Promise<boolean> {
    const ctx = this.#ctx;
    const keepMs = 3 * ctx.ttlMs;
    let reply: Promise<unknown>;
    if (space === "lock") {
      const k = lockKeys(ctx.keyPrefix, key);
      // Waiters who do not hear are skipped on one node, as a release does (see RELEASE).
      const skipUnheard = ctx.cluster ? "" : "1";
      reply = FORCE_RELEASE.run(
        ctx.client,
        [k.lock, k.waiters, k.token, k.revoked],
        [skipUnheard, options.token.toString(), options.reason, keepMs],
      );
    } else {
      const k = permitKeys(ctx.keyPrefix, key);
      reply = FORCE_RELEASE_PERMITS.run(
        ctx.client,
        [...k.all, k.revoked],
        [options.token.toString(), options.reason, keepMs],
      );
    }
    const answer = await boundedCall(reply, {
      timeoutMs: ctx.commandTimeoutMs,
      what: `${ctx.where}: forced release`,
      name: key,
      signal: options.signal,
      mapError: (e) => toBatonError(e, `${ctx.where}: forced release of "${key}" failed`),
    });
    return decodeForceReleased(answer);
  }
}
