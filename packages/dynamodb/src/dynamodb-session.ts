import {
  BatchGetItemCommand,
  DeleteItemCommand,
  GetItemCommand,
  UpdateItemCommand,
  type UpdateItemCommandOutput,
} from "@aws-sdk/client-dynamodb";
import {
  type BackendAcquireOptions,
  BackendUnavailableError,
  backoffMs,
  type ForceReleaseOptions,
  type Grant,
  type Holder,
  type KeepAliveResult,
  type KeyPage,
  type KeyState,
  LeftoverCleanup,
  type ListKeysOptions,
  linkSignals,
  SessionEnd,
  SessionLostError,
  type StoredRecord,
  sleep,
  systemClock,
} from "@baton/core";
import type { DynamoDBSession } from "./dynamodb-client.js";
import {
  decodeGrantedToken,
  decodeLock,
  decodeSession,
  encodeKey,
  type Item,
  type LockState,
  type SessionState,
} from "./dynamodb-codec.js";
import { isConditionFailed, sessionGone } from "./dynamodb-errors.js";
import { DynamoDBInspection, RevocationNotes } from "./dynamodb-inspection.js";
import { lockKey, PARTITION_KEY, sessionKey } from "./dynamodb-keys.js";
import { DynamoDBRecords } from "./dynamodb-records.js";
import type { DynamoDBTable } from "./dynamodb-table.js";
import type { ExpiryObserver } from "./expiry-observer.js";
import {
  closeRequest,
  expireRequest,
  type GrantFrom,
  grantRequest,
  releaseRequest,
  renewRequest,
} from "./lock-requests.js";

/** What a DynamoDB grant carries to release exactly itself: the session it was granted to. */
interface DynamoDBGrantHandle {
  readonly session: string;
}

/** Everything a {@link DynamoDBItemSession} needs from its backend. */
export interface DynamoDBSessionContext {
  readonly table: DynamoDBTable;
  readonly prefix: string;
  readonly ownerId: string;
  /** The session's id (random), the end of its item's key. */
  readonly sessionId: string;
  readonly ttlMs: number;
  readonly observer: ExpiryObserver;
  /** The longest pause between looks at a held lock, in ms. */
  readonly pollMaxMs: number;
  /** The first pause between looks is at most this, in ms. */
  readonly pollMinMs: number;
  readonly onClose: (session: DynamoDBItemSession) => void;
}

/** Who holds a lock this session could not take, and when that holder expires unless renewed. */
interface Held {
  readonly session: string;
  readonly expiresAt: number;
  /** The token of the grant seen, when the read showed it: a new one means the lock moved. */
  readonly token?: bigint;
}

/** The outcome of one attempt at a lock: the grant's token, or who holds it. */
type Attempt = { readonly token: bigint } | { readonly held: Held };

/** True when `next` shows a later grant of the lock than `seen` did. */
function movedOn(seen: Held, next: Held): boolean {
  return seen.token !== undefined && next.token !== undefined && next.token !== seen.token;
}

/** Attempts in a row that find the lock changing under them before one is called "held". */
const MAX_RACES = 4;

/**
 * One session item and the locks that point at it. A lock item names its holding session; it
 * is held while that session's item lives, so one renewal (raising the session's counter)
 * renews every lock of the session. A lock whose session item is gone is free to anyone; a
 * session whose counter no client has seen change for a whole TTL of it (on that client's
 * own monotonic clock) is ended by that client with a delete conditional on the counter, and
 * its locks are then free too.
 */
export class DynamoDBItemSession implements DynamoDBSession {
  readonly ownerId: string;
  readonly ttlMs: number;
  /** Aborted with a `SessionLostError` when a renewal finds the session item gone. */
  readonly lost: AbortSignal;
  /** The session's id, in its item's key and in every lock item it holds. */
  readonly sessionId: string;
  readonly #context: DynamoDBSessionContext;
  readonly #table: DynamoDBTable;
  readonly #key: string;
  readonly #records: DynamoDBRecords;
  /** Its signal aborts on loss or close: it ends every wait of this session. */
  readonly #end = new SessionEnd("the DynamoDB session ended");
  /** Tokens of the grants this session holds, by lock name. */
  readonly #held = new Map<string, bigint>();
  /**
   * Lock names that may still point at this session although no grant of theirs is held: a
   * release that failed (its token), or a grant whose reply was lost (`null`). Cleared by the
   * next grant of the name, or after a keepalive (see `#cleanLeftover`).
   */
  readonly #leftovers = new LeftoverCleanup<bigint | null>(
    (name, token) => this.#cleanLeftover(name, token),
    this.#end.signal,
  );
  readonly #inspection: DynamoDBInspection;
  /** Revocation notes of forced releases, read by the renewals. */
  readonly #notes = new RevocationNotes();
  #closing: Promise<void> | undefined;

  constructor(context: DynamoDBSessionContext) {
    this.#context = context;
    this.#table = context.table;
    this.ownerId = context.ownerId;
    this.ttlMs = context.ttlMs;
    this.sessionId = context.sessionId;
    this.#key = sessionKey(context.prefix, context.sessionId);
    this.lost = this.#end.lost;
    this.#records = new DynamoDBRecords(context.table, context.prefix);
    this.#inspection = new DynamoDBInspection(context.table, context.prefix, context.observer);
  }

  async keepAlive(): Promise<KeepAliveResult | undefined> {
    this.#end.assertLive();
    const what = "could not renew the session";
    const remove = this.#notes.toRemove();
    let reply: UpdateItemCommandOutput;
    try {
      reply = await this.#table.call(
        (abortSignal) =>
          this.#table.client.send(
            new UpdateItemCommand(renewRequest(this.#table.name, this.#key, remove)),
            { abortSignal },
          ),
        what,
        // A renewal is waited for up to a third of the TTL: core retries sooner after a failure.
        {
          timeoutMs: Math.min(
            this.#table.requestTimeoutMs,
            Math.max(250, Math.floor(this.ttlMs / 3)),
          ),
        },
      );
    } catch (error) {
      if (isConditionFailed(error)) {
        const lost = sessionGone(this.#table.context(what));
        this.#end.markLost(lost);
        throw lost;
      }
      throw error;
    }
    this.#leftovers.retry();
    const revoked = this.#notes.settle(remove, reply.Attributes, this.#held);
    return revoked.length === 0 ? undefined : { revoked };
  }

  async acquire(name: string, options: BackendAcquireOptions): Promise<Grant | null> {
    this.#end.assertLive();
    return await this.#leftovers.acquiring(name, async () => {
      const key = lockKey(this.#context.prefix, name);
      const first = await this.#attempt(name, key, options.value, undefined);
      if ("token" in first) return this.#grant(name, first.token);
      if (!options.wait) return null;
      return await this.#wait(name, key, options.value, options.signal, first.held);
    });
  }

  async release(grant: Grant): Promise<boolean> {
    const handle = grant.handle as DynamoDBGrantHandle | undefined;
    // Owner check by session and token: only this session's grant of that token is ours.
    if (handle === undefined || handle.session !== this.sessionId) return false;
    const name = grant.key;
    if (this.#held.get(name) === grant.token) this.#held.delete(name);
    const key = lockKey(this.#context.prefix, name);
    try {
      await this.#update(releaseRequest(this.#table.name, key, this.sessionId, grant.token), {
        what: `could not release "${name}"`,
      });
      return true;
    } catch (error) {
      if (isConditionFailed(error)) return false;
      // The lock may still point at this live session: cleaned after the next keepalive.
      this.#leftovers.remember(name, grant.token);
      throw error;
    }
  }

  async holder(name: string): Promise<Holder | null> {
    return await this.#inspection.holder(name);
  }

  /** One page of lock or record keys (see dynamodb-inspection.ts). */
  async listKeys(options: ListKeysOptions): Promise<KeyPage> {
    this.#end.assertLive();
    return await this.#inspection.listKeys(options);
  }

  /** The holder of a lock key, or `null` (see dynamodb-inspection.ts). */
  async inspectKey(space: "lock" | "permit", key: string): Promise<KeyState | null> {
    this.#end.assertLive();
    return await this.#inspection.inspectKey(space, key);
  }

  /** Frees one grant of any session, by token (see dynamodb-inspection.ts). */
  async forceRelease(
    space: "lock" | "permit",
    key: string,
    options: ForceReleaseOptions,
  ): Promise<boolean> {
    this.#end.assertLive();
    return await this.#inspection.forceRelease(space, key, options);
  }

  /** The durable record `key` (see dynamodb-records.ts), or `null`. */
  async readRecord(key: string): Promise<StoredRecord | null> {
    this.#end.assertLive();
    return await this.#records.read(key);
  }

  /** Writes record `key` if its version is `expected`; the new version, or `null`. */
  async writeRecord(key: string, value: string, expected: string | null): Promise<string | null> {
    this.#end.assertLive();
    return await this.#records.write(key, value, expected);
  }

  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#end.close(new SessionLostError("the DynamoDB session was closed"));
    this.#context.onClose(this);
    this.#held.clear();
    this.#leftovers.clear();
    // Deleting the session item frees every lock that points at it, in one request.
    await this.#table.call(
      (abortSignal) =>
        this.#table.client.send(new DeleteItemCommand(closeRequest(this.#table.name, this.#key)), {
          abortSignal,
        }),
      "could not close the session",
    );
  }

  /**
   * One attempt: the conditional grant; when the lock is held, a look at its holder's
   * session, and a takeover when that session is gone or has expired. Each step is one
   * conditional request, so a race with another client costs a retry, never a double grant.
   */
  async #attempt(
    name: string,
    key: string,
    value: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<Attempt> {
    let from: GrantFrom = { free: true };
    let held: Held | undefined;
    for (let race = 0; race < MAX_RACES; race++) {
      let lock: LockState;
      try {
        // Hot path: see docs/hot-path.md, "DynamoDB".
        return { token: await this.#tryGrant(name, key, value, from, signal) };
      } catch (error) {
        if (!isConditionFailed(error)) throw error;
        const item = (error as { Item?: Item }).Item;
        lock = decodeLock(item ?? (await this.#getItem(key, name)));
      }
      from = { free: true };
      if (lock.session === undefined || lock.session === this.sessionId) continue;
      const judged = await this.#judge(lock.session, name);
      if (judged === "gone") {
        from = { session: lock.session };
        continue;
      }
      held =
        lock.token === undefined
          ? { session: lock.session, expiresAt: judged.expiresAt }
          : { session: lock.session, expiresAt: judged.expiresAt, token: lock.token };
      if (judged.expiresAt > this.#context.observer.now()) return { held };
      // No renewal seen for a whole TTL of that session: end it, unless it renewed meanwhile.
      if (await this.#expire(lock.session, judged.state.beat, name)) {
        from = { session: lock.session };
      }
    }
    // The lock changed under every attempt: look again after the longest pause.
    return {
      held: held ?? {
        session: "",
        expiresAt: this.#context.observer.now() + this.#context.pollMaxMs,
      },
    };
  }

  /**
   * The conditional grant. Its outcome is unknown when the reply is lost: the lock may then
   * point at this session, so the name is remembered and cleaned unless a later grant of it
   * comes first. A grant given up on (the wait's signal) is released when its reply arrives.
   */
  async #tryGrant(
    name: string,
    key: string,
    value: string | undefined,
    from: GrantFrom,
    signal: AbortSignal | undefined,
  ): Promise<bigint> {
    const input = grantRequest(this.#table.name, key, this.sessionId, this.ownerId, value, from);
    let reply: UpdateItemCommandOutput;
    try {
      reply = await this.#table.call(
        (abortSignal) => this.#table.client.send(new UpdateItemCommand(input), { abortSignal }),
        `could not acquire "${name}"`,
        {
          signal,
          onAbandoned: (late) => {
            this.#leftovers.remember(name, null);
            void late
              .then((r) => this.#releaseLate(name, key, decodeGrantedToken(r.Attributes)))
              .catch(() => undefined);
          },
        },
      );
    } catch (error) {
      if (error instanceof BackendUnavailableError) this.#leftovers.remember(name, null);
      throw error;
    }
    // This grant supersedes whatever an earlier one of the name left behind.
    this.#leftovers.forget(name);
    return decodeGrantedToken(reply.Attributes);
  }

  /** Releases a grant that arrived after its acquire was given up on. */
  async #releaseLate(name: string, key: string, token: bigint): Promise<void> {
    if (this.#held.has(name)) return;
    await this.#update(releaseRequest(this.#table.name, key, this.sessionId, token), {
      what: `could not release "${name}"`,
    }).catch(() => undefined);
    if (this.#leftovers.get(name) === null) this.#leftovers.forget(name);
  }

  /**
   * Waits for a held lock without a queue: looks at the lock and its holder's session in one
   * consistent batch read, with equal-jitter backoff from `pollMinMs` up to `pollMaxMs`, and
   * never past the moment the holder expires unless renewed. Nothing is written while the
   * holder lives; an aborted wait leaves nothing behind.
   */
  async #wait(
    name: string,
    key: string,
    value: string | undefined,
    signal: AbortSignal,
    first: Held,
  ): Promise<Grant> {
    const linked = linkSignals([signal, this.#end.signal]);
    const waitSignal = linked.signal;
    const poll = { minMs: this.#context.pollMinMs, maxMs: this.#context.pollMaxMs };
    let held = first;
    let round = 0;
    try {
      for (;;) {
        const untilExpiry = Math.max(0, held.expiresAt - this.#context.observer.now());
        await sleep(systemClock, Math.min(backoffMs(round++, poll), untilExpiry + 1), waitSignal);
        try {
          const look = await this.#look(key, held.session, name, waitSignal);
          if (look !== undefined) {
            // Granted again, even to the same session: the lock is being passed around, and
            // its holder may hold off to let a waiter in, so look again soon.
            if (movedOn(held, look)) round = 0;
            held = look;
            if (look.expiresAt > this.#context.observer.now()) continue;
          }
          const before = held.session;
          const attempt = await this.#attempt(name, key, value, waitSignal);
          if ("token" in attempt) {
            if (waitSignal.aborted) {
              await this.#releaseLate(name, key, attempt.token);
              throw waitSignal.reason;
            }
            return this.#grant(name, attempt.token);
          }
          // The lock changed hands or was granted again: it is being passed around, and the
          // next release may come soon (its holder may even hold off to let waiters in), so
          // look again soon.
          if (
            (attempt.held.session !== before && attempt.held.session !== "") ||
            movedOn(held, attempt.held)
          ) {
            round = 0;
          }
          held = attempt.held;
        } catch (error) {
          if (waitSignal.aborted) throw waitSignal.reason;
          if (!(error instanceof BackendUnavailableError)) throw error;
          // A failed look or attempt: keep waiting, the backoff grows.
        }
      }
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      throw error;
    } finally {
      linked.dispose();
    }
  }

  /**
   * One look at a held lock: the lock item and the session item of the last holder seen, in
   * one consistent batch read. Resolves who holds it and when they expire, or `undefined`
   * when it looks free, taken over by a session not yet looked at, or gone (then attempt).
   */
  async #look(
    key: string,
    session: string,
    name: string,
    signal: AbortSignal,
  ): Promise<Held | undefined> {
    const holderKey = sessionKey(this.#context.prefix, session);
    const reply = await this.#table.call(
      (abortSignal) =>
        this.#table.client.send(
          new BatchGetItemCommand({
            RequestItems: {
              [this.#table.name]: {
                Keys: [encodeKey(key), encodeKey(holderKey)],
                ConsistentRead: true,
              },
            },
          }),
          { abortSignal },
        ),
      `could not look at "${name}"`,
      { signal },
    );
    const readAt = this.#context.observer.now();
    if (Object.keys(reply.UnprocessedKeys ?? {}).length > 0) {
      throw new BackendUnavailableError(
        this.#table.context(
          `could not look at "${name}": DynamoDB left the read unprocessed (throttled)`,
        ),
      );
    }
    const items = reply.Responses?.[this.#table.name] ?? [];
    const byKey = (k: string) => items.find((item) => item[PARTITION_KEY]?.S === k);
    const lock = decodeLock(byKey(key));
    if (lock.session !== session) return undefined;
    const state = decodeSession(byKey(holderKey));
    if (state === undefined) return undefined;
    const expiresAt = this.#context.observer.observe(session, state, readAt);
    return lock.token === undefined
      ? { session, expiresAt }
      : { session, expiresAt, token: lock.token };
  }

  /** Reads another session's item: `"gone"`, or its state and when it expires unless renewed. */
  async #judge(
    session: string,
    name: string,
  ): Promise<"gone" | { readonly state: SessionState; readonly expiresAt: number }> {
    const state = decodeSession(
      await this.#getItem(sessionKey(this.#context.prefix, session), name),
    );
    const readAt = this.#context.observer.now();
    if (state === undefined) {
      this.#context.observer.forget(session);
      return "gone";
    }
    return { state, expiresAt: this.#context.observer.observe(session, state, readAt) };
  }

  /** Ends an expired session: true when its item is gone now (deleted, or already). */
  async #expire(session: string, beat: string, name: string): Promise<boolean> {
    try {
      await this.#table.call(
        (abortSignal) =>
          this.#table.client.send(
            new DeleteItemCommand(
              expireRequest(this.#table.name, sessionKey(this.#context.prefix, session), beat),
            ),
            { abortSignal },
          ),
        `could not end the expired holder of "${name}"`,
      );
      this.#context.observer.forget(session);
      return true;
    } catch (error) {
      // It renewed after all (or someone else ended it): look again.
      if (isConditionFailed(error)) return false;
      throw error;
    }
  }

  /** A strongly consistent read of one item. */
  async #getItem(key: string, name: string): Promise<Item | undefined> {
    const reply = await this.#table.call(
      (abortSignal) =>
        this.#table.client.send(
          new GetItemCommand({
            TableName: this.#table.name,
            Key: encodeKey(key),
            ConsistentRead: true,
          }),
          { abortSignal },
        ),
      `could not read the holder of "${name}"`,
    );
    return reply.Item;
  }

  async #update(
    input: ConstructorParameters<typeof UpdateItemCommand>[0],
    options: { readonly what: string },
  ): Promise<UpdateItemCommandOutput> {
    return await this.#table.call(
      (abortSignal) => this.#table.client.send(new UpdateItemCommand(input), { abortSignal }),
      options.what,
    );
  }

  #grant(name: string, token: bigint): Grant {
    this.#held.set(name, token);
    const handle: DynamoDBGrantHandle = { session: this.sessionId };
    return { key: name, ownerId: this.ownerId, token, handle };
  }

  /**
   * Cleans up a leftover of `name` (after a keepalive, in the background): releases what a
   * failed release or a lost grant reply may have left pointing at this session. A leftover
   * of unknown token whose name is held again is superseded by that grant: nothing to send.
   */
  #cleanLeftover(name: string, token: bigint | null): Promise<boolean> | boolean {
    if (token === null && this.#held.has(name)) return true;
    const key = lockKey(this.#context.prefix, name);
    return this.#update(releaseRequest(this.#table.name, key, this.sessionId, token), {
      what: `could not release "${name}"`,
    }).then(
      () => true,
      (error: unknown) => isConditionFailed(error),
    );
  }
}
