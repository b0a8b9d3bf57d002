import type { ITxnResponse, IWatchResponse } from "etcd3";
import { describe, expect, it } from "vitest";
import {
  compactedAt,
  decodeHolder,
  decodeLeaseId,
  decodeListCursor,
  decodePermitEntry,
  decodePermitLimit,
  decodeQueueEntry,
  decodeRecordValue,
  decodeRecordVersion,
  decodeRevision,
  decodeRevocation,
  decodeTtlSeconds,
  encodeHolderValue,
  encodeListCursor,
  encodePermitEntry,
  encodePermitLimit,
  encodeRecordValue,
  encodeRecordVersion,
  encodeRevision,
  encodeRevocation,
  hasDelete,
  leaseIdOfHex,
} from "../src/etcd-codec.js";
import {
  leaseHex,
  nameOfKey,
  revocationKey,
  revocationPrefix,
  spaceRange,
} from "../src/etcd-keys.js";
import { claimReply, enqueueReply, tryReply, turnReply } from "../src/queue-requests.js";

// Replies below are what etcd 3.4 sent through etcd3 1.1.2 for the adapter's own requests
// (headers trimmed to the fields that are read).

/** A response header at `revision`. */
const header = (revision: string) => ({
  cluster_id: "15118495548433857066",
  member_id: "13668033151171901709",
  revision,
  raft_term: "2",
});

/** A key as a range inside a transaction returns it. */
const kv = (key: string, createRevision: string, value = "") => ({
  key: Buffer.from(key),
  create_revision: createRevision,
  mod_revision: createRevision,
  version: "1",
  value: Buffer.from(value),
  lease: "4111120368187754770",
});

const put = (revision: string) => ({
  response_put: { header: header(revision), prev_kv: null },
  response: "response_put",
});

const range = (kvs: ReturnType<typeof kv>[], revision: string) => ({
  response_range: { kvs, header: header(revision), more: false, count: String(kvs.length) },
  response: "response_range",
});

const reply = (succeeded: boolean, revision: string, responses: unknown[]) =>
  ({ responses, header: header(revision), succeeded }) as unknown as ITxnResponse;

describe("etcd wire formats (no server)", () => {
  it("stores a holder as Baton's JSON, marked waiting while it queues", () => {
    expect(encodeHolderValue("worker-1", undefined).toString()).toBe(
      '{"baton":1,"owner":"worker-1"}',
    );
    expect(encodeHolderValue("worker-1", "10.0.0.7:8080").toString()).toBe(
      '{"baton":1,"owner":"worker-1","value":"10.0.0.7:8080"}',
    );
    expect(encodeHolderValue("worker-1", "v", true).toString()).toBe(
      '{"baton":1,"owner":"worker-1","value":"v","waiting":true}',
    );
    expect(encodeHolderValue("worker-1", undefined, true).toString()).toBe(
      '{"baton":1,"owner":"worker-1","waiting":true}',
    );
  });

  it("reads Baton's holders back, a waiting key as nobody, other clients' keys by lease", () => {
    const baton = Buffer.from('{"baton":1,"owner":"worker-1","value":"10.0.0.7:8080"}');
    expect(decodeHolder(baton, 13n, "390da23176b44914")).toEqual({
      ownerId: "worker-1",
      token: 13n,
      value: "10.0.0.7:8080",
    });
    expect(decodeHolder(Buffer.from('{"baton":1,"owner":"worker-1"}'), 9n, "ab")).toEqual({
      ownerId: "worker-1",
      token: 9n,
    });
    expect(decodeHolder(Buffer.from('{"baton":1,"owner":"b","waiting":true}'), 10n, "ab")).toBe(
      null,
    );
    // `etcdctl lock` stores an empty value.
    expect(decodeHolder(Buffer.from(""), 9n, "390da23176b44912")).toEqual({
      ownerId: "etcd-lease:390da23176b44912",
      token: 9n,
    });
    expect(decodeHolder(Buffer.from('{"baton":1,oops'), 9n, "ab")).toEqual({
      ownerId: "etcd-lease:ab",
      token: 9n,
      value: '{"baton":1,oops',
    });
    for (const [owner, value] of [
      ["o", undefined],
      ["o", ""],
      ['quote " and \\', "ü\n"],
    ] as const) {
      for (const waiting of [false, true]) {
        const decoded = decodeHolder(encodeHolderValue(owner, value, waiting), 1n, "ab");
        const held =
          value === undefined
            ? { ownerId: owner, token: 1n }
            : { ownerId: owner, token: 1n, value };
        expect(decoded).toEqual(waiting ? null : held);
      }
    }
  });

  it("carries revisions, lease ids and TTLs as decimal strings", () => {
    expect(decodeRevision("13")).toBe(13n);
    expect(encodeRevision(9_007_199_254_740_993n)).toBe("9007199254740993");
    expect(decodeRevision(encodeRevision(9_007_199_254_740_993n))).toBe(9_007_199_254_740_993n);
    expect(decodeLeaseId("4111120368187754770")).toBe(4111120368187754770n);
    // The queue key of that lease, as `etcdctl lock` names it (`%x`).
    expect(leaseHex("4111120368187754770")).toBe("390da23176b44912");
    // LeaseKeepAlive answers: renewed, then the lease is gone.
    expect(decodeTtlSeconds("5")).toBe(5);
    expect(decodeTtlSeconds("0")).toBe(0);
  });

  it("stores a record's value as its UTF-8 bytes; its version is the key's mod_revision", () => {
    const value = '{"v":1,"state":"done","holder":"billing-7 ✓","token":"42"}';
    const raw = encodeRecordValue(value);
    expect(raw.toString("hex")).toBe(Buffer.from(value, "utf8").toString("hex"));
    expect(decodeRecordValue(raw)).toBe(value);
    // A range returns `mod_revision` as a decimal string: the version is that string.
    const stored = kv("records:nightly%2Fslot%2F1", "17", value);
    expect(encodeRecordVersion(decodeRevision(stored.mod_revision))).toBe("17");
    expect(decodeRecordVersion("17")).toBe(17n);
    expect(decodeRecordVersion("9223372036854775807")).toBe(2n ** 63n - 1n);
    // No existing key has one of these as its mod_revision ("0" is a missing key's).
    for (const none of ["0", "-1", "07", "1.5", "", " 1", "9223372036854775808", "x"]) {
      expect(decodeRecordVersion(none), none).toBeUndefined();
    }
  });

  it("reads deletes and compactions from watch responses", () => {
    const deleted = {
      events: [{ type: "Delete", kv: kv("cap/x", "0"), prev_kv: null }],
      header: header("5"),
      watch_id: "0",
      created: false,
      canceled: false,
      compact_revision: "0",
      cancel_reason: "",
      fragment: false,
    } as unknown as IWatchResponse;
    expect(hasDelete(deleted)).toBe(true);
    expect(compactedAt(deleted)).toBe(0n);
    const created = { ...deleted, events: [], created: true } as unknown as IWatchResponse;
    expect(hasDelete(created)).toBe(false);
    const putOnly = {
      ...deleted,
      events: [{ type: "Put", kv: kv("cap/x", "4", "v"), prev_kv: null }],
    } as unknown as IWatchResponse;
    expect(hasDelete(putOnly)).toBe(false);
    // A watch from a compacted revision is cancelled with the compaction's revision.
    const compacted = {
      ...deleted,
      events: [],
      header: header("0"),
      canceled: true,
      compact_revision: "8",
    } as unknown as IWatchResponse;
    expect(compactedAt(compacted)).toBe(8n);
  });
});

describe("etcd queue transaction replies (no server)", () => {
  const a = "q/390da23176b44912";
  const b = "q/390da23176b44914";

  it("a join: granted when the lock was free, waiting when created behind, found on a retry", () => {
    expect(enqueueReply(reply(true, "9", [put("9")]))).toEqual({ revision: 9n, token: 9n });
    const createdBehind = {
      response_txn: { responses: [put("10")], header: header("0"), succeeded: true },
      response: "response_txn",
    };
    expect(enqueueReply(reply(false, "10", [createdBehind]))).toEqual({ revision: 10n });
    const foundOnRetry = {
      response_txn: {
        responses: [range([kv(b, "10")], "10")],
        header: header("0"),
        succeeded: false,
      },
      response: "response_txn",
    };
    expect(enqueueReply(reply(false, "12", [foundOnRetry]))).toEqual({ revision: 10n });
    expect(enqueueReply(reply(false, "12", []))).toBeUndefined();
  });

  it("a try: the write's revision when free, else the oldest key", () => {
    expect(tryReply(reply(true, "9", [put("9")]))).toEqual({ revision: 9n });
    const held = tryReply(
      reply(false, "10", [range([kv(a, "9", '{"baton":1,"owner":"a"}')], "10")]),
    );
    expect("oldest" in held && held.oldest?.key.toString()).toBe(a);
    expect(tryReply(reply(false, "10", [range([], "10")]))).toEqual({ oldest: undefined });
  });

  it("a turn: the token when it came, else our key's revision and the key before ours", () => {
    expect(turnReply(reply(true, "12", [put("12")]))).toEqual({ token: 12n });
    const notYet = turnReply(
      reply(false, "10", [range([kv(a, "9")], "10"), range([kv(b, "10")], "10")]),
    );
    expect(notYet).toMatchObject({ ownRevision: 10n, revision: 10n });
    expect("before" in notYet && notYet.before?.key.toString()).toBe(a);
    expect(
      turnReply(reply(false, "11", [range([kv(a, "9")], "11"), range([], "11")])),
    ).toMatchObject({
      ownRevision: undefined,
    });
  });

  it("a claim: the write's revision, or nothing when our key is gone", () => {
    expect(claimReply(reply(true, "13", [put("13")]))).toBe(13n);
    expect(claimReply(reply(false, "13", []))).toBeUndefined();
  });

  it("a permit entry's value carries owner, permits, mode and the published value", () => {
    const entry = { ownerId: "worker-1", permits: 3, mode: "permit" as const, value: "v" };
    expect(encodePermitEntry(entry).toString()).toBe(
      '{"baton":1,"owner":"worker-1","permits":3,"mode":"permit","value":"v"}',
    );
    expect(decodePermitEntry(encodePermitEntry(entry))).toEqual(entry);
    const read = { ownerId: "o", permits: 1, mode: "read" as const };
    expect(decodePermitEntry(encodePermitEntry(read))).toEqual(read);
    // Bytes Baton did not write, or a count no entry can have: not an entry of ours.
    for (const raw of [
      "",
      "hello",
      '{"baton":1,"owner":"o"}',
      '{"baton":1,"owner":"o","permits":0,"mode":"permit"}',
      '{"baton":1,"owner":"o","permits":1.5,"mode":"permit"}',
      '{"baton":1,"owner":"o","permits":1,"mode":"lock"}',
      '{"baton":1,"owner":',
    ]) {
      expect(decodePermitEntry(Buffer.from(raw)), raw).toBeUndefined();
    }
  });

  it("a permit key's limit is its decimal number", () => {
    expect(encodePermitLimit(2_147_483_647).toString()).toBe("2147483647");
    expect(decodePermitLimit(Buffer.from("3"))).toBe(3);
    for (const raw of ["", "0", "-1", "03", "1e3", "x"]) {
      expect(decodePermitLimit(Buffer.from(raw)), raw).toBeUndefined();
    }
  });
});

describe("etcd inspection's wire formats", () => {
  it("a revocation entry carries space, key, token and reason as JSON", () => {
    const revocation = { space: "lock" as const, key: "invoices", token: 1234n, reason: "stuck" };
    expect(encodeRevocation(revocation).toString()).toBe(
      '{"baton":1,"space":"lock","key":"invoices","token":"1234","reason":"stuck"}',
    );
    expect(decodeRevocation(encodeRevocation(revocation))).toEqual(revocation);
    for (const raw of [
      "",
      "stuck",
      '{"baton":1,"space":"job","key":"k","token":"1","reason":"r"}',
      '{"baton":1,"space":"lock","key":"k","token":"-1","reason":"r"}',
      '{"baton":1,"space":"lock","key":"k","token":"1"}',
    ]) {
      expect(decodeRevocation(Buffer.from(raw)), raw).toBeUndefined();
    }
  });

  it("a queue key's value shows its owner, value and whether it waits; another client's is foreign", () => {
    expect(decodeQueueEntry(encodeHolderValue("w-1", "v", true), "694d")).toEqual({
      ownerId: "w-1",
      value: "v",
      waiting: true,
    });
    expect(decodeQueueEntry(encodeHolderValue("w-1", undefined), "694d")).toEqual({
      ownerId: "w-1",
      waiting: false,
    });
    // etcdctl lock stores an empty value.
    expect(decodeQueueEntry(Buffer.alloc(0), "694d")).toEqual({
      ownerId: "etcd-lease:694d",
      waiting: false,
    });
  });

  it("a listing cursor round-trips the last key (any bytes) and the last name", () => {
    const key = Buffer.from([0x61, 0x2f, 0xff, 0x00]);
    const cursor = encodeListCursor(key, "a/b");
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeListCursor(cursor)).toEqual({ lastKey: key, lastName: "a/b" });
    expect(decodeListCursor(encodeListCursor(key, undefined))).toEqual({
      lastKey: key,
      lastName: undefined,
    });
    expect(decodeListCursor("not a cursor")).toBeUndefined();
  });

  it("a lease id is the decimal of the hex at the end of a key", () => {
    expect(leaseIdOfHex("694d8b2f1c3a7e05")).toBe("7587873981642472965");
    expect(leaseHex(leaseIdOfHex("694d8b2f1c3a7e05"))).toBe("694d8b2f1c3a7e05");
  });

  it("keys of each space are named back to the coordinator's names", () => {
    const lock = spaceRange("app/", "lock", "a");
    expect(lock.start.toString()).toBe("app/a");
    expect(nameOfKey("lock", lock.base, Buffer.from("app/a/b/694d"))).toBe("a/b");
    // Record keys lie among lock keys: no lease hex after a slash.
    expect(nameOfKey("lock", lock.base, Buffer.from("app/records:a%2Fb"))).toBeUndefined();
    // With no name prefix, the range stops before the 0xff keys (permits, revocations).
    expect(spaceRange("app/", "lock", "").end).toEqual(Buffer.from([...Buffer.from("app/"), 0xff]));
    const permits = spaceRange("app/", "permit", "");
    const entry = Buffer.concat([
      permits.base,
      Buffer.from("sem"),
      Buffer.from([0xff]),
      Buffer.from("e:694d.0"),
    ]);
    expect(nameOfKey("permit", permits.base, entry)).toBe("sem");
    const records = spaceRange("app/", "record", "job/");
    expect(records.start.toString()).toBe("app/records:job%2F");
    expect(nameOfKey("record", records.base, Buffer.from("app/records:job%2F2026%252F"))).toBe(
      "job/2026%2F",
    );
    const revocations = revocationPrefix("app/", "694d");
    expect(revocationKey(revocations, "lock", 7n, "a").toString("latin1")).toBe(
      "app/\xffrevoked:694d/lock:7:a",
    );
  });
});
