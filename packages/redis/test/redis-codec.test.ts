import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ACQUIRE_PERMITS,
  DOWNGRADE_PERMITS,
  FORCE_RELEASE_PERMITS,
  INSPECT_PERMITS,
  PERMIT_HOLDERS,
  RELEASE_PERMITS,
  RENEW_WITH_PERMITS,
} from "../src/permit-scripts.js";
import {
  ARRIVALS_FIELD,
  decodeAcquireReply,
  decodeDowngradeReply,
  decodeEntry,
  decodeHolderReply,
  decodeListCursor,
  decodeLockInspection,
  decodeNodeAcquireReply,
  decodePayload,
  decodePermitAcquireReply,
  decodePermitHolders,
  decodePermitInspection,
  decodeRecordReply,
  decodeRecordWriteReply,
  decodeReleasedCount,
  decodeReleasedOne,
  decodeRenewals,
  decodeRenewReply,
  decodeTurnMessage,
  encodeEntry,
  encodeHeld,
  encodeListCursor,
  encodePayload,
  encodeRecordWrite,
  encodeTurnBehind,
  encodeTurnGranted,
  GRANTED_FIELD,
  grantPrefix,
  HELD_FIELD,
  isRecordVersionAfter,
  LIMIT_FIELD,
  lineEntry,
  MODE_CODES,
  NO_RECORD_EXPECTED,
  NOT_RENEWED,
  ownerPrefix,
  PERMIT_GRANTED,
  PERMIT_NOT_GRANTED,
  PERMIT_OTHER_LIMIT,
  payloadTail,
  RECORD_NOT_WRITTEN,
  RENEW_REVOKED,
  RENEWED,
  WAITING_FIELD,
  waitId,
} from "../src/redis-codec.js";
import { keySpaceLayout, lockKeys, permitKeys, recordKey } from "../src/redis-keys.js";
import {
  ACQUIRE,
  ACQUIRE_NO_TOKEN,
  FORCE_RELEASE,
  INSPECT_LOCK,
  READ_HOLDER,
  RELEASE,
  RELEASE_ONE,
  RENEW,
  WRITE_RECORD,
} from "../src/scripts.js";

describe("redis codec: the wire formats, both ways", () => {
  it("lock payload: owner, grant id, owner id and value on their own lines", () => {
    const tail = payloadTail("billing-7", "job 12");
    expect(tail).toBe("\nbilling-7\njob 12");
    expect(payloadTail("billing-7", undefined)).toBe("\nbilling-7");
    const wire = encodePayload("5f2a9c", 1733050000123456n, tail);
    expect(wire).toBe("5f2a9c:1733050000123456\nbilling-7\njob 12");
    expect(decodePayload(wire, true)).toEqual({
      ownerId: "billing-7",
      token: 1733050000123456n,
      value: "job 12",
    });
    // Redlock's grant id is a private counter: no token.
    expect(decodePayload("5f2a9c:3\nbilling-7", false)).toEqual({
      ownerId: "billing-7",
      token: 0n,
    });
    // A grant handed to wait 4 of the session in a line.
    expect(decodePayload(encodePayload(waitId("5f2a9c", 4), 9, "\nw"), true)).toEqual({
      ownerId: "w",
      token: 9n,
    });
    // A value may hold the separators; it comes last.
    expect(decodePayload("s:1\no\na:b\nc", true)).toEqual({
      ownerId: "o",
      token: 1n,
      value: "a:b\nc",
    });
  });

  it("lock payload: a value Baton did not write decodes to null", () => {
    for (const foreign of ["", "plain", "no-colon\nowner", "s:12x\nowner", "s:\nowner"]) {
      expect(decodePayload(foreign, true), JSON.stringify(foreign)).toBeNull();
    }
  });

  it("owner checks compare prefixes of the payload", () => {
    const wire = encodePayload("5f2a9c", 42, payloadTail("o", undefined));
    expect(ownerPrefix("5f2a9c")).toBe("5f2a9c:");
    expect(grantPrefix("5f2a9c", 42)).toBe("5f2a9c:42\n");
    expect(wire.startsWith(ownerPrefix("5f2a9c"))).toBe(true);
    expect(wire.startsWith(grantPrefix("5f2a9c", 42n))).toBe(true);
    expect(wire.startsWith(grantPrefix("5f2a9c", 4))).toBe(false);
  });

  it("line entry: the wait id, its TTL, then the payload tail", () => {
    expect(lineEntry(waitId("5f2a9c", 3), 20_000, payloadTail("w", "v"))).toBe(
      "5f2a9c.3:20000\nw\nv",
    );
  });

  it("acquire reply: a token, or the holder's PTTL folded into an integer <= 0", () => {
    expect(decodeAcquireReply(1733050000123456)).toEqual({ token: 1733050000123456n });
    expect(decodeAcquireReply(1)).toEqual({ token: 1n });
    expect(encodeHeld(4_999)).toBe(-5_000);
    expect(decodeAcquireReply(-5_000)).toEqual({ pttl: 4_999 });
    // A key without expiry (PTTL -1), not Baton's.
    expect(encodeHeld(-1)).toBe(0);
    expect(decodeAcquireReply(0)).toEqual({ pttl: -1 });
    expect(decodeNodeAcquireReply(1)).toBe("granted");
    expect(decodeNodeAcquireReply(-5_000)).toBe("held");
    expect(decodeNodeAcquireReply(0)).toBe("held");
  });

  it("renewal, release and holder replies", () => {
    expect(decodeRenewReply([1, 0, 1])).toEqual([true, false, true]);
    expect(decodeReleasedOne(1)).toBe(true);
    expect(decodeReleasedOne(0)).toBe(false);
    expect(decodeHolderReply(["s:1\no", 900])).toEqual({ payload: "s:1\no", pttl: 900 });
    expect(decodeHolderReply([null, -2])).toEqual({ payload: null, pttl: -2 });
  });

  it("records: the write script's arguments and replies, the stored hash as HMGET reads it", () => {
    expect(NO_RECORD_EXPECTED).toBe("");
    expect(encodeRecordWrite("running", null)).toEqual(["", "running"]);
    expect(encodeRecordWrite("done", "41")).toEqual(["41", "done"]);
    // Not a version a record can have: nothing to send, nothing can match.
    for (const never of ["", "0", "041", "-1", "4.0", " 4", "x", "12345678901234567"]) {
      expect(encodeRecordWrite("v", never), JSON.stringify(never)).toBeUndefined();
    }
    expect(encodeRecordWrite("done", "1796537942931753")).toEqual(["1796537942931753", "done"]);
    // Past 2^53 the script's arithmetic would not be exact: no version is that large.
    expect(encodeRecordWrite("done", "9007199254740993")).toBeUndefined();
    expect(isRecordVersionAfter("1796537942931753", null)).toBe(true);
    expect(isRecordVersionAfter("1796537942931753", "41")).toBe(true);
    expect(isRecordVersionAfter("41", "41")).toBe(false);
    expect(RECORD_NOT_WRITTEN).toBe(0);
    expect(decodeRecordWriteReply(1)).toBe("1");
    expect(decodeRecordWriteReply(42)).toBe("42");
    expect(decodeRecordWriteReply(0)).toBeNull();
    expect(() => decodeRecordWriteReply(-1)).toThrow(/record write script/);
    expect(decodeRecordReply(["done", "42"])).toEqual({ value: "done", version: "42" });
    expect(decodeRecordReply(["", "1"])).toEqual({ value: "", version: "1" });
    expect(decodeRecordReply([null, null])).toBeNull();
    expect(decodeRecordReply(["foreign", null])).toBeNull();
  });

  it("turn messages: a grant to a wait, the wait ahead's lease, or look now", () => {
    expect(encodeTurnGranted(3, 1733050000123457n)).toBe("g3:1733050000123457");
    expect(decodeTurnMessage("g3:1733050000123457")).toEqual({
      kind: "granted",
      wait: "3",
      token: 1733050000123457n,
    });
    expect(encodeTurnBehind(20_000)).toBe("b20000");
    expect(decodeTurnMessage("b20000")).toEqual({ kind: "behind", leaseMs: 20_000 });
    expect(decodeTurnMessage("b0")).toEqual({ kind: "behind", leaseMs: 0 });
    // "" is the subscriber's own: it reconnected; anything unknown means look too.
    for (const look of ["", "r", "g3:", "g3:x", "g3", "b-1", "bx", "x"]) {
      expect(decodeTurnMessage(look), JSON.stringify(look)).toEqual({ kind: "look" });
    }
  });
});

describe("redis codec: permit keys", () => {
  it("entry: permits, mode, token (empty while waiting), then the holder tail", () => {
    const tail = payloadTail("exports-3", "batch 9");
    const waiting = encodeEntry(2, "permit", undefined, tail);
    expect(waiting).toBe("2:p:\nexports-3\nbatch 9");
    expect(decodeEntry(waiting)).toEqual({
      permits: 2,
      mode: "permit",
      token: undefined,
      ownerId: "exports-3",
      value: "batch 9",
    });
    const read = encodeEntry(1, "read", 0n, payloadTail("r", undefined));
    expect(read).toBe("1:r:0\nr");
    expect(decodeEntry(read)).toEqual({ permits: 1, mode: "read", token: 0n, ownerId: "r" });
    expect(decodeEntry(encodeEntry(2_147_483_647, "write", 17n, "\nw"))).toMatchObject({
      permits: 2_147_483_647,
      mode: "write",
      token: 17n,
    });
    for (const foreign of ["", "1:p:1", "x:p:1\no", "1:q:1\no", "1:p:1a\no", "1:p:1:2\no"]) {
      expect(decodeEntry(foreign), JSON.stringify(foreign)).toBeNull();
    }
  });

  it("acquire, downgrade, release and holders replies", () => {
    expect(decodePermitAcquireReply([PERMIT_GRANTED, "1733050000123456", 0])).toEqual({
      kind: "granted",
      token: 1733050000123456n,
      lost: false,
    });
    expect(decodePermitAcquireReply([PERMIT_GRANTED, "0", 1])).toEqual({
      kind: "granted",
      token: 0n,
      lost: true,
    });
    expect(decodePermitAcquireReply([PERMIT_NOT_GRANTED, 250, 0])).toEqual({
      kind: "not-granted",
      nextDeadlineMs: 250,
      lost: false,
    });
    expect(decodePermitAcquireReply([PERMIT_OTHER_LIMIT, "3", 0])).toEqual({
      kind: "other-limit",
      stored: 3,
      lost: false,
    });
    expect(decodeDowngradeReply("42")).toBe(42n);
    expect(decodeDowngradeReply(null)).toBeNull();
    expect(decodeReleasedCount(1)).toBe(1);
    const entry = encodeEntry(1, "permit", 7n, payloadTail("o", "v"));
    expect(decodePermitHolders([1_000, "s.1", entry, "1800", "s.2", "2:p:\nw", "1900"])).toEqual([
      { ownerId: "o", token: 7n, value: "v", permits: 1, mode: "permit", remainingMs: 800 },
    ]);
    expect(decodePermitHolders([0])).toEqual([]);
  });
});

describeBackend("redis", (url) => {
  describe("redis codec against a real server", () => {
    let raw: Redis;
    let sub: Redis;
    const prefix = `codec-${randomUUID().slice(0, 8)}:`;

    beforeAll(async () => {
      raw = new Redis(url, { lazyConnect: true });
      sub = new Redis(url, { lazyConnect: true });
      await Promise.all([raw.connect(), sub.connect()]);
    });
    afterAll(() => {
      raw.disconnect();
      sub.disconnect();
    });

    /** Subscribes to `channels`; `take()` resolves the messages published so far, in order. */
    const listen = async (...channels: string[]) => {
      const seen: [string, string][] = [];
      sub.removeAllListeners("message");
      sub.on("message", (channel: string, message: string) => seen.push([channel, message]));
      await sub.subscribe(...channels);
      return {
        take: async (n: number) => {
          for (let i = 0; i < 100 && seen.length < n; i++)
            await new Promise((r) => setTimeout(r, 10));
          return seen.splice(0);
        },
        close: () => sub.unsubscribe(...channels),
      };
    };

    it("the acquire script stores the payload the codec decodes, and announces the grant", async () => {
      const keys = lockKeys(prefix, "acquire");
      const events = await listen(keys.channel);
      const tail = payloadTail("billing-7", "job 12");
      const reply = await ACQUIRE.run(
        raw,
        [keys.lock, keys.token],
        [ownerPrefix("5f2a9c"), 5_000, tail],
      );
      const got = decodeAcquireReply(reply);
      if (!("token" in got)) throw new Error(`not granted: ${String(reply)}`);
      // A missing counter starts at the server's clock in microseconds.
      expect(got.token).toBeGreaterThan(1_600_000_000_000_000n);
      const stored = await raw.get(keys.lock);
      expect(stored).toBe(encodePayload("5f2a9c", got.token, tail));
      expect(decodePayload(stored as string, true)).toEqual({
        ownerId: "billing-7",
        token: got.token,
        value: "job 12",
      });
      expect(await events.take(1)).toEqual([[keys.channel, "g5000"]]);
      await events.close();
    });

    it("a held lock answers the holder's PTTL, also for a key without expiry", async () => {
      const keys = lockKeys(prefix, "held");
      await raw.set(keys.lock, encodePayload("other", 1, "\no"), "PX", 30_000);
      const held = decodeAcquireReply(
        await ACQUIRE.run(raw, [keys.lock, keys.token], [ownerPrefix("me"), 5_000, "\nme"]),
      );
      expect(held).toHaveProperty("pttl");
      const { pttl } = held as { pttl: number };
      expect(pttl).toBeGreaterThan(25_000);
      expect(pttl).toBeLessThanOrEqual(30_000);
      const noTtl = lockKeys(prefix, "no-ttl");
      await raw.set(noTtl.lock, "not baton's");
      const reply = await ACQUIRE.run(
        raw,
        [noTtl.lock, noTtl.token],
        [ownerPrefix("me"), 5_000, "\nme"],
      );
      expect(reply).toBe(encodeHeld(-1));
      expect(decodeAcquireReply(reply)).toEqual({ pttl: -1 });
      expect(
        decodeNodeAcquireReply(await ACQUIRE_NO_TOKEN.run(raw, [keys.lock], ["x:1\no", 5_000])),
      ).toBe("held");
    });

    it("a release hands the lock to the line's first entry, telling it and the one behind", async () => {
      const keys = lockKeys(prefix, "handoff");
      await raw.set(keys.token, "41");
      await raw.set(keys.lock, encodePayload("holder", 41, "\nh"), "PX", 30_000);
      const first = lineEntry(waitId("aaaa", 3), 20_000, payloadTail("first", "v1"));
      // The one behind has a longer TTL than the new holder's: it may sleep past that lease.
      const second = lineEntry(waitId("bbbb", 1), 30_000, payloadTail("second", undefined));
      await raw.zadd(keys.waiters, 1, first, 2, second);
      const events = await listen(keys.channel, keys.turn("aaaa"), keys.turn("bbbb"));
      const released = await RELEASE.run(
        raw,
        [keys.lock, keys.waiters, keys.token],
        ["1", grantPrefix("holder", 41)],
      );
      expect(decodeReleasedOne(released)).toBe(true);
      const messages = await events.take(3);
      expect(messages).toEqual([
        [keys.turn("aaaa"), encodeTurnGranted(3, 42)],
        [keys.turn("bbbb"), encodeTurnBehind(20_000)],
        [keys.channel, "r"],
      ]);
      expect(decodeTurnMessage(messages[0]?.[1] ?? "")).toEqual({
        kind: "granted",
        wait: "3",
        token: 42n,
      });
      expect(decodeTurnMessage(messages[1]?.[1] ?? "")).toEqual({
        kind: "behind",
        leaseMs: 20_000,
      });
      // The lock is the first wait's payload with the next token, for its own TTL.
      expect(await raw.get(keys.lock)).toBe(encodePayload(waitId("aaaa", 3), 42, "\nfirst\nv1"));
      expect(await raw.pttl(keys.lock)).toBeGreaterThan(19_000);
      // Not the old holder's any more.
      expect(
        decodeReleasedOne(
          await RELEASE.run(
            raw,
            [keys.lock, keys.waiters, keys.token],
            ["1", grantPrefix("holder", 41)],
          ),
        ),
      ).toBe(false);
      await events.close();
    });

    it("a release tells the one behind nothing when the new holder's TTL is no shorter than its own", async () => {
      const keys = lockKeys(prefix, "handoff-same-ttl");
      await raw.set(keys.token, "7");
      await raw.set(keys.lock, encodePayload("holder", 7, "\nh"), "PX", 30_000);
      const first = lineEntry(waitId("cccc", 1), 10_000, payloadTail("first", undefined));
      const second = lineEntry(waitId("dddd", 1), 10_000, payloadTail("second", undefined));
      await raw.zadd(keys.waiters, 1, first, 2, second);
      const events = await listen(keys.channel, keys.turn("cccc"), keys.turn("dddd"));
      const released = await RELEASE.run(
        raw,
        [keys.lock, keys.waiters, keys.token],
        ["1", grantPrefix("holder", 7)],
      );
      expect(decodeReleasedOne(released)).toBe(true);
      // The waiter behind sleeps at most its own TTL, so it looks by the time this lease ends:
      // only the new holder's process is woken, and watchers.
      expect(await events.take(2)).toEqual([
        [keys.turn("cccc"), encodeTurnGranted(1, 8)],
        [keys.channel, "r"],
      ]);
      expect(await raw.get(keys.lock)).toBe(encodePayload(waitId("cccc", 1), 8, "\nfirst"));
      expect(await raw.get(keys.token)).toBe("8");
      expect(await raw.zrange(keys.waiters, "0", "-1")).toEqual([second]);
      await events.close();
    });

    it("renewal and holder replies, and a Redlock node's grant and release", async () => {
      const mine = lockKeys(prefix, "renew-mine");
      const gone = lockKeys(prefix, "renew-gone");
      await raw.set(mine.lock, encodePayload("s", 7, "\no"), "PX", 1_000);
      const renewed = await RENEW.run(
        raw,
        [mine.lock, gone.lock],
        [30_000, grantPrefix("s", 7), grantPrefix("s", 8)],
      );
      expect(renewed).toEqual([1, 0]);
      expect(decodeRenewReply(renewed)).toEqual([true, false]);
      expect(await raw.pttl(mine.lock)).toBeGreaterThan(29_000);

      const holder = await READ_HOLDER.run(raw, [mine.lock], []);
      expect(decodeHolderReply(holder)).toMatchObject({ payload: encodePayload("s", 7, "\no") });
      const missing = await READ_HOLDER.run(raw, [gone.lock], []);
      expect(missing).toEqual([null, -2]);
      expect(decodeHolderReply(missing)).toEqual({ payload: null, pttl: -2 });

      const node = lockKeys(prefix, "redlock");
      const events = await listen(node.channel);
      const payload = encodePayload("s", 1, "\no");
      const granted = await ACQUIRE_NO_TOKEN.run(raw, [node.lock], [payload, 5_000]);
      expect(granted).toBe(1);
      expect(decodeNodeAcquireReply(granted)).toBe("granted");
      expect(
        decodeReleasedOne(
          await RELEASE_ONE.run(raw, [node.lock], [grantPrefix("s", 2), node.channel]),
        ),
      ).toBe(false);
      expect(
        decodeReleasedOne(
          await RELEASE_ONE.run(raw, [node.lock], [grantPrefix("s", 1), node.channel]),
        ),
      ).toBe(true);
      expect(await events.take(1)).toEqual([[node.channel, "1"]]);
      await events.close();
    });

    it("the record write script stores a hash of value and version without expiry, as the codec reads it", async () => {
      const key = recordKey(prefix, "nightly/slot/2026-12-01T02:00:00Z");
      const write = (value: string, expected: string | null) =>
        WRITE_RECORD.run(raw, [key], encodeRecordWrite(value, expected) ?? []);
      const [seconds, micros] = (await raw.time()) as [string | number, string | number];
      const before = Number(seconds) * 1_000_000 + Number(micros);
      const created = (await write("running", null)) as number;
      // A new version is the server's clock in microseconds.
      expect(created).toBeGreaterThanOrEqual(before);
      const v1 = decodeRecordWriteReply(created) as string;
      expect(v1).toBe(String(created));
      expect(await raw.hgetall(key)).toEqual({ value: "running", version: v1 });
      expect(await raw.pttl(key)).toBe(-1);
      const read = await raw.hmget(key, "value", "version");
      expect(read).toEqual(["running", v1]);
      expect(decodeRecordReply(read)).toEqual({ value: "running", version: v1 });
      // Expected absent while present, and a stale version: the not-written reply.
      expect(await write("other", null)).toBe(RECORD_NOT_WRITTEN);
      const v2 = String(await write("done", v1));
      expect(Number(v2)).toBeGreaterThan(created);
      expect(await write("stale", v1)).toBe(RECORD_NOT_WRITTEN);
      // The same write again: its version, and nothing written.
      expect(String(await write("done", v1))).toBe(v2);
      expect(await raw.hgetall(key)).toEqual({ value: "done", version: v2 });
      // A version ahead of the clock (written by a server whose clock was ahead): one more.
      const ahead = String(Number(v2) + 10_000_000_000);
      await raw.hset(key, "version", ahead);
      expect(String(await write("later", ahead))).toBe(String(Number(ahead) + 1));
      expect(await raw.pttl(key)).toBe(-1);
      const missing = await raw.hmget(recordKey(prefix, "missing"), "value", "version");
      expect(missing).toEqual([null, null]);
      expect(decodeRecordReply(missing)).toBeNull();
    });

    it("the permit scripts store entries the codec decodes, tell a granted waiter on its turn channel, and renew by session", async () => {
      const keys = permitKeys(prefix, "permits");
      const [a, b] = ["5f2a9c", "77b0e1"];
      const events = await listen(keys.turn(b));
      const acquire = (entry: string, sid: string, permits: number, join: string, has = "") =>
        ACQUIRE_PERMITS.run(raw, keys.all, [
          entry,
          sid,
          5_000,
          3,
          permits,
          "p",
          "\nown",
          join,
          has,
        ]);
      const first = decodePermitAcquireReply(await acquire(waitId(a, 1), a, 2, ""));
      if (first.kind !== "granted") throw new Error("not granted");
      expect(first.token).toBeGreaterThan(1_600_000_000_000_000n);
      expect(decodePermitAcquireReply(await acquire(waitId(b, 1), b, 2, ""))).toEqual({
        kind: "not-granted",
        nextDeadlineMs: -1,
        lost: false,
      });
      // A session that says it holds grants there, and has no entry: they are lost.
      expect(
        decodePermitAcquireReply(await acquire(waitId("c0ffee", 1), "c0ffee", 2, "", "1")),
      ).toMatchObject({ kind: "not-granted", lost: true });
      expect(decodePermitAcquireReply(await acquire(waitId(a, 2), a, 2, "", "1"))).toMatchObject({
        kind: "not-granted",
        lost: false,
      });
      const queued = decodePermitAcquireReply(await acquire(waitId(b, 1), b, 2, "1"));
      expect(queued.kind).toBe("not-granted");
      const entries = await raw.hgetall(keys.entries);
      expect(entries).toMatchObject({
        [LIMIT_FIELD]: "3",
        [HELD_FIELD]: "2",
        [GRANTED_FIELD]: "1",
        [WAITING_FIELD]: "1",
        [ARRIVALS_FIELD]: "2",
        [a]: "1",
        [b]: "1",
        [waitId(a, 1)]: encodeEntry(2, "permit", first.token, "\nown"),
        [waitId(b, 1)]: encodeEntry(2, "permit", undefined, "\nown"),
      });
      expect(await raw.zrange(keys.queue, "0", "-1")).toEqual([waitId(a, 1), waitId(b, 1)]);
      const renewed = await RENEW_WITH_PERMITS.run(raw, [keys.sessions], [5_000, a]);
      expect(decodeRenewReply(renewed)).toEqual([true]);
      expect(
        decodeRenewReply(await RENEW_WITH_PERMITS.run(raw, [keys.sessions], [5_000, "x"])),
      ).toEqual([false]);
      expect(decodePermitHolders(await PERMIT_HOLDERS.run(raw, keys.all, []))).toEqual([
        expect.objectContaining({ ownerId: "own", token: first.token, permits: 2 }),
      ]);
      expect(decodeReleasedCount(await RELEASE_PERMITS.run(raw, keys.all, [a, waitId(a, 1)]))).toBe(
        1,
      );
      expect(await events.take(1)).toEqual([
        [keys.turn(b), encodeTurnGranted(1, first.token + 1n)],
      ]);
      expect(
        decodeDowngradeReply(await DOWNGRADE_PERMITS.run(raw, keys.all, [b, waitId(b, 1)])),
      ).toBeNull();
      expect(decodeReleasedCount(await RELEASE_PERMITS.run(raw, keys.all, [b]))).toBe(1);
      expect(await raw.exists(keys.queue, keys.entries, keys.sessions)).toBe(0);
      expect(await raw.get(keys.token)).toBe(String(first.token + 1n));
      await events.close();
    });
  });
});

describe("redis codec: inspection and forced release", () => {
  it("renewal replies: renewed, not renewed, a lock's revocation, a permit key's revoked entries", () => {
    expect(
      decodeRenewals([1, 0, "rdeploy stuck", [0, "5f2a.3", "hung", "5f2a.4", "hung"]]),
    ).toEqual([
      { renewed: true },
      { renewed: false },
      { renewed: false, reason: "deploy stuck" },
      {
        renewed: false,
        revoked: new Map([
          ["5f2a.3", "hung"],
          ["5f2a.4", "hung"],
        ]),
      },
    ]);
    expect(decodeRenewals([RENEWED, `${RENEW_REVOKED}`])).toEqual([
      { renewed: true },
      { renewed: false, reason: "" },
    ]);
  });

  it("listing cursors: node, SCAN cursor and the last name given; anything else is no cursor", () => {
    expect(encodeListCursor({ node: 2, scan: "1792" })).toBe("2.1792");
    expect(decodeListCursor("2.1792")).toEqual({ node: 2, scan: "1792" });
    // Any name, dots and all, survives the trip.
    const cursor = { node: 2, scan: "1792", after: "jobs/a.b ü" };
    expect(decodeListCursor(encodeListCursor(cursor))).toEqual(cursor);
    expect(decodeListCursor("")).toBeUndefined();
    expect(decodeListCursor("2.x.3")).toBeUndefined();
    expect(decodeListCursor("2.1792.a.b")).toBeUndefined();
  });

  it("key space layouts: SCAN patterns with globs escaped, names decoded from keys", () => {
    const lock = keySpaceLayout("baton:", "lock", "a*{");
    expect(lock.pattern).toBe("baton:{a\\*%7B*}:[lw]*");
    expect(lock.nameOf(lockKeys("baton:", "a*{b}%").lock)).toBe("a*{b}%");
    expect(lock.nameOf(lockKeys("baton:", "x").waiters)).toBe("x");
    expect(lock.nameOf(lockKeys("baton:", "x").token)).toBeUndefined();
    expect(lock.nameOf(permitKeys("baton:", "x").queue)).toBeUndefined();
    const permit = keySpaceLayout("baton:", "permit", "");
    expect(permit.pattern).toBe("baton:{*}:p:q");
    expect(permit.nameOf(permitKeys("baton:", "pool").queue)).toBe("pool");
    expect(permit.nameOf(lockKeys("baton:", "pool").lock)).toBeUndefined();
    const record = keySpaceLayout("baton:", "record", "job");
    expect(record.pattern).toBe("baton:records:{job*}");
    expect(record.nameOf(recordKey("baton:", "job/1"))).toBe("job/1");
  });
});

describeBackend("redis", (url) => {
  describe("redis codec: inspection scripts against a real server", () => {
    let raw: Redis;
    const prefix = `codec-i-${randomUUID().slice(0, 8)}:`;
    beforeAll(async () => {
      raw = new Redis(url, { lazyConnect: true });
      await raw.connect();
    });
    afterAll(() => raw.disconnect());

    it("a lock's inspection reply, its forced release, and the renewal that reads the reason", async () => {
      const keys = lockKeys(prefix, "forced");
      const tail = payloadTail("billing-7", "job 12");
      const token = decodeAcquireReply(
        await ACQUIRE.run(raw, [keys.lock, keys.token], [ownerPrefix("5f2a"), 5_000, tail]),
      ) as { token: bigint };
      await raw.zadd(keys.waiters, 1, lineEntry("77b1.1", 4_000, payloadTail("next", undefined)));
      const reply = await INSPECT_LOCK.run(raw, [keys.lock, keys.waiters], [100]);
      expect(reply).toEqual([
        encodePayload("5f2a", token.token, tail),
        expect.any(Number),
        1,
        "77b1.1:4000\nnext",
      ]);
      expect(decodeLockInspection(reply)).toEqual({
        holders: [
          {
            ownerId: "billing-7",
            token: token.token,
            value: "job 12",
            remainingMs: (reply as number[])[1],
          },
        ],
        waiters: { count: 1, ownerIds: ["next"] },
      });
      const args = (t: bigint) => ["", t.toString(), "stuck", 1_000];
      const force = [keys.lock, keys.waiters, keys.token, keys.revoked];
      expect(await FORCE_RELEASE.run(raw, force, args(token.token - 1n))).toBe(0);
      expect(await FORCE_RELEASE.run(raw, force, args(token.token))).toBe(1);
      // Handed to the waiter with the next token; the revocation kept by grant prefix.
      expect(await raw.get(keys.lock)).toBe(encodePayload("77b1.1", token.token + 1n, "\nnext"));
      expect(await raw.hgetall(keys.revoked)).toEqual({
        [grantPrefix("5f2a", token.token)]: "stuck",
      });
      expect(await raw.pttl(keys.revoked)).toBeGreaterThan(10_000);
      expect(await RENEW.run(raw, [keys.lock], [5_000, grantPrefix("5f2a", token.token)])).toEqual([
        `${RENEW_REVOKED}stuck`,
      ]);
      expect(
        await RENEW.run(raw, [keys.lock], [5_000, grantPrefix("77b1.1", token.token + 1n)]),
      ).toEqual([RENEWED]);
      expect(await RENEW.run(raw, [keys.lock], [5_000, grantPrefix("other", 1)])).toEqual([
        NOT_RENEWED,
      ]);
    });

    it("a permit key's inspection reply, the forced release of one grant, the renewal that reads it", async () => {
      const keys = permitKeys(prefix, "pool");
      const acquire = (entry: string, sid: string, permits: number) =>
        ACQUIRE_PERMITS.run(raw, keys.all, [
          entry,
          sid,
          5_000,
          2,
          permits,
          MODE_CODES.permit,
          payloadTail(sid, undefined),
          "1",
          "",
        ]);
      const [, first] = (await acquire("aa.1", "aa", 1)) as [number, string];
      const [, second] = (await acquire("aa.2", "aa", 1)) as [number, string];
      await acquire("bb.1", "bb", 1);
      const reply = (await INSPECT_PERMITS.run(raw, keys.all, [100])) as (string | number)[];
      expect(reply.slice(1, 4)).toEqual([2, 2, 1]);
      expect(reply.slice(4)).toEqual([
        "aa.1",
        encodeEntry(1, "permit", BigInt(first), "\naa"),
        expect.any(String),
        "aa.2",
        encodeEntry(1, "permit", BigInt(second), "\naa"),
        expect.any(String),
        encodeEntry(1, "permit", undefined, "\nbb"),
      ]);
      expect(decodePermitInspection(reply)).toMatchObject({
        limit: 2,
        holders: [
          { ownerId: "aa", token: BigInt(first), permits: 1, mode: "permit" },
          { ownerId: "aa", token: BigInt(second), permits: 1, mode: "permit" },
        ],
        waiters: { count: 1, ownerIds: ["bb"] },
      });
      expect(
        await FORCE_RELEASE_PERMITS.run(raw, [...keys.all, keys.revoked], [first, "hung", 1_000]),
      ).toBe(1);
      expect(await raw.hgetall(keys.revoked)).toEqual({ "aa.1": "hung" });
      expect(await RENEW_WITH_PERMITS.run(raw, [keys.sessions], [5_000, "aa"])).toEqual([
        [RENEWED, "aa.1", "hung"],
      ]);
      expect(await RENEW_WITH_PERMITS.run(raw, [keys.sessions], [5_000, "bb"])).toEqual([RENEWED]);
      expect(decodePermitInspection(await INSPECT_PERMITS.run(raw, keys.all, [100]))).toMatchObject(
        {
          holders: [{ ownerId: "aa" }, { ownerId: "bb" }],
        },
      );
    });
  });
});
