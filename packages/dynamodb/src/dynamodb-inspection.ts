import { GetItemCommand, ScanCommand, UpdateItemCommand } from "@aws-sdk/client-dynamodb";
import type {
  ForceReleaseOptions,
  Holder,
  KeyPage,
  KeyState,
  ListKeysOptions,
  RevokedGrant,
} from "@baton/core";
import {
  ATTR,
  decodeLock,
  decodeRevocations,
  decodeSession,
  encodeKey,
  encodeRevocation,
  encodeString,
  type Item,
  revocationAttribute,
  type SessionState,
} from "./dynamodb-codec.js";
import { isConditionFailed } from "./dynamodb-errors.js";
import { lockKey, PARTITION_KEY, recordKey, sessionKey } from "./dynamodb-keys.js";
import type { DynamoDBTable } from "./dynamodb-table.js";
import type { ExpiryObserver } from "./expiry-observer.js";
import { releaseRequest, revokeRequest, unrevokeRequest } from "./lock-requests.js";

/**
 * How far past its TTL, as a fraction of it, a session's last renewal (by its writer's wall
 * clock) must be before inspection counts it expired: an allowance for clocks that disagree.
 */
const WALL_ALLOWANCE = 0.5;

/**
 * Inspection and forced release for operators, on the item layout of dynamodb-keys.ts.
 *
 * - Listing is a `Scan` of the table with `Limit` (items read per page) and a filter on the
 *   key's beginning (and, for locks, on a holding session), projected to the key alone; the
 *   cursor is the last key read (`ExclusiveStartKey`). A page read only items of other kinds
 *   comes back empty with a cursor.
 * - A holder is read as `holder()` reads it: the lock item, then its session's item; a
 *   session no client has seen renew for a whole TTL counts as gone. Waiters poll without
 *   writing anything, so the table cannot tell who waits.
 * - A forced release first leaves a note in the holding session's item (the revoked grant's
 *   token and the reason), then frees the lock item in place on condition that the same
 *   session still holds it with that token: the fencing counter stays, so the next grant's
 *   token is greater, and a waiter's next look finds the lock free. The holder's renewal
 *   returns its session item, so it reads the note in the request it sends anyway.
 */
export class DynamoDBInspection {
  readonly #table: DynamoDBTable;
  readonly #prefix: string;
  readonly #observer: ExpiryObserver;

  constructor(table: DynamoDBTable, prefix: string, observer: ExpiryObserver) {
    this.#table = table;
    this.#prefix = prefix;
    this.#observer = observer;
  }

  /** One page of lock keys (held, by a session item's id) or record keys; no permit keys. */
  async listKeys(options: ListKeysOptions): Promise<KeyPage> {
    const { space, prefix, cursor, limit, signal } = options;
    if (space === "permit") return { keys: [] };
    const base = space === "lock" ? lockKey(this.#prefix, "") : recordKey(this.#prefix, "");
    const reply = await this.#table.call(
      (abortSignal) =>
        this.#table.client.send(
          new ScanCommand({
            TableName: this.#table.name,
            Limit: limit,
            ConsistentRead: true,
            FilterExpression:
              space === "lock"
                ? "begins_with(#pk, :p) AND attribute_exists(#session)"
                : "begins_with(#pk, :p)",
            ProjectionExpression: "#pk",
            ExpressionAttributeNames:
              space === "lock"
                ? { "#pk": PARTITION_KEY, "#session": ATTR.session }
                : { "#pk": PARTITION_KEY },
            ExpressionAttributeValues: { ":p": encodeString(base + prefix) },
            ...(cursor === undefined ? {} : { ExclusiveStartKey: encodeKey(cursor) }),
          }),
          { abortSignal },
        ),
      `could not list the ${space} keys`,
      { signal },
    );
    const keys: string[] = [];
    for (const item of reply.Items ?? []) {
      const pk = item[PARTITION_KEY]?.S;
      if (pk?.startsWith(base + prefix)) keys.push(pk.slice(base.length));
    }
    const next = reply.LastEvaluatedKey?.[PARTITION_KEY]?.S;
    return next === undefined ? { keys } : { keys, cursor: next };
  }

  /**
   * The holder of lock `key` (waiters are not known to the table); permit keys: none. Besides
   * what `holder()` judges, a session whose last renewal is more than its TTL and half again
   * in the past, by the renewal's writer's clock against this one, counts as expired (a
   * client that never saw the session renew could not tell otherwise), and `remainingMs` is
   * the shorter of this client's view and the writer clock's (0 when overdue).
   */
  async inspectKey(space: "lock" | "permit", key: string): Promise<KeyState | null> {
    if (space === "permit") return null;
    const read = await this.#read(key);
    if (read === null) return null;
    const { holder, state } = read;
    if (state.renewedAt === undefined) return { holders: [holder] };
    const wallLeftMs = state.renewedAt + state.ttlMs - Date.now();
    if (wallLeftMs < -state.ttlMs * WALL_ALLOWANCE) return null;
    const remainingMs = Math.max(0, Math.min(holder.remainingMs, Math.round(wallLeftMs)));
    return { holders: [{ ...holder, remainingMs }] };
  }

  /**
   * Who holds lock `name`, with the time left unless its session renews, as this client sees
   * it (from its first sight of the session's renewal counter); `null` when free, or held by
   * a session gone or not seen to renew for a whole TTL.
   */
  async holder(name: string): Promise<Holder | null> {
    return (await this.#read(name))?.holder ?? null;
  }

  /** The lock item, then its holder's session item: `null` when free or expired (above). */
  async #read(name: string): Promise<{
    readonly holder: Holder & { remainingMs: number };
    readonly state: SessionState;
  } | null> {
    const lock = decodeLock(await this.#getItem(lockKey(this.#prefix, name), name));
    if (lock.session === undefined) return null;
    const item = await this.#getItem(sessionKey(this.#prefix, lock.session), name);
    const state = decodeSession(item);
    if (state === undefined) return null;
    const now = this.#observer.now();
    const expiresAt = this.#observer.observe(lock.session, state, now);
    if (expiresAt <= now) return null;
    const remainingMs = Math.round(expiresAt - now);
    const holder =
      lock.value === undefined
        ? { ownerId: lock.ownerId, token: lock.token, remainingMs }
        : { ownerId: lock.ownerId, token: lock.token, value: lock.value, remainingMs };
    return { holder, state };
  }

  /**
   * Frees grant `token` of lock `key`, whoever holds it: the note to the holder's session
   * first, then the lock item freed in place (see the class). `false` when that grant is not
   * held (released, a later grant, or its session gone: a lock left pointing at a gone
   * session is freed all the same).
   */
  async forceRelease(
    space: "lock" | "permit",
    key: string,
    options: ForceReleaseOptions,
  ): Promise<boolean> {
    if (space === "permit") return false;
    const { token, reason, signal } = options;
    const item = lockKey(this.#prefix, key);
    const lock = decodeLock(await this.#getItem(item, key, signal));
    if (lock.session === undefined || lock.token !== token) return false;
    const holderItem = sessionKey(this.#prefix, lock.session);
    const attribute = revocationAttribute(key, token);
    const what = `could not force-release "${key}"`;
    let noted = true;
    try {
      await this.#update(
        revokeRequest(
          this.#table.name,
          holderItem,
          attribute,
          encodeRevocation(key, token, reason),
        ),
        what,
        signal,
      );
    } catch (error) {
      if (!isConditionFailed(error)) throw error;
      noted = false;
    }
    try {
      await this.#update(releaseRequest(this.#table.name, item, lock.session, token), what, signal);
    } catch (error) {
      if (!isConditionFailed(error)) throw error;
      // Released or granted again meanwhile: the grant is not held, take the note back.
      if (noted) {
        await this.#update(unrevokeRequest(this.#table.name, holderItem, attribute), what).catch(
          () => undefined,
        );
      }
      return false;
    }
    return noted;
  }

  async #update(
    input: ConstructorParameters<typeof UpdateItemCommand>[0],
    what: string,
    signal?: AbortSignal,
  ): Promise<void> {
    await this.#table.call(
      (abortSignal) => this.#table.client.send(new UpdateItemCommand(input), { abortSignal }),
      what,
      { signal },
    );
  }

  /** A strongly consistent read of one item. */
  async #getItem(key: string, name: string, signal?: AbortSignal): Promise<Item | undefined> {
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
      { signal },
    );
    return reply.Item;
  }
}

/**
 * The holder's side of a forced release: the revocation notes its renewals return. A note
 * is reported once, for a grant the session still holds with that token, and removed by the
 * next renewal after the one that returned it (so a renewal whose reply was lost does not
 * lose a note).
 */
export class RevocationNotes {
  /** Notes a renewal returned: the next renewal removes them. */
  readonly #read = new Set<string>();

  /** The notes the next renewal removes. */
  toRemove(): string[] {
    return [...this.#read];
  }

  /**
   * After a renewal that removed `removed` and returned `item`: the grants of `held` (lock
   * name to token) revoked since, each taken out of `held`.
   */
  settle(
    removed: readonly string[],
    item: Item | undefined,
    held: Map<string, bigint>,
  ): RevokedGrant[] {
    for (const attribute of removed) this.#read.delete(attribute);
    const revoked: RevokedGrant[] = [];
    for (const note of decodeRevocations(item)) {
      this.#read.add(note.attribute);
      if (held.get(note.key) !== note.token) continue;
      held.delete(note.key);
      revoked.push({ space: "lock", key: note.key, token: note.token, reason: note.reason });
    }
    return revoked;
  }
}
