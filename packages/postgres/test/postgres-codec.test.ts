import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrate } from "../src/index.js";
import {
  decodeHolder,
  decodeLostKey,
  decodePermitAcquire,
  decodePermitCheck,
  decodePermitDowngrade,
  decodePermitHolders,
  decodePermitNotice,
  decodePid,
  decodeUnlocked,
  grantedToken,
  holderRowValues,
  keptTokenColumn,
  RECORD_MARK,
  recordNeeded,
  TOKEN_LOCK_LIMIT,
  tokenFromOffsetSql,
  tokenOffsetSql,
  tokenToRecord,
  unlockHeldValues,
} from "../src/postgres-codec.js";
import { advisoryKey, schemaNames, tokenTag } from "../src/postgres-keys.js";
import { callPrepared } from "../src/prepared-call.js";
import { statements } from "../src/statements.js";

/** A token as the sequence hands them out: the server's clock in microseconds, and on. */
const TOKEN = 1_764_590_400_123_456n;

describe("postgres codec (no I/O)", () => {
  it("the token column of a granted acquire: a plain token, or the record mark and the token", () => {
    expect(RECORD_MARK).toBe("r");
    expect(recordNeeded("1764590400123456")).toBe(false);
    expect(grantedToken("1764590400123456")).toBe(TOKEN);
    expect(recordNeeded("r1764590400123456")).toBe(true);
    expect(tokenToRecord("r1764590400123456")).toBe(TOKEN);
  });

  it("holder rows, release and renewal rows", () => {
    expect(decodeHolder([])).toBeNull();
    expect(decodeHolder([{ owner: "o1", token: "1764590400123456", value: null }])).toEqual({
      ownerId: "o1",
      token: TOKEN,
    });
    expect(decodeHolder([{ owner: "o1", token: "42", value: "node-a" }])).toEqual({
      ownerId: "o1",
      token: 42n,
      value: "node-a",
    });
    // The time left, when the statement tells it (never below 0); none when it is NULL.
    expect(decodeHolder([{ owner: "o1", token: "42", value: null, remaining_ms: 2_500 }])).toEqual({
      ownerId: "o1",
      token: 42n,
      remainingMs: 2_500,
    });
    expect(decodeHolder([{ owner: "o1", token: "42", value: null, remaining_ms: -3 }])).toEqual({
      ownerId: "o1",
      token: 42n,
      remainingMs: 0,
    });
    expect(decodeHolder([{ owner: "o1", token: "42", value: null, remaining_ms: null }])).toEqual({
      ownerId: "o1",
      token: 42n,
    });
    expect(decodeUnlocked("t")).toBe(true);
    expect(decodeUnlocked("f")).toBe(false);
    expect(decodeUnlocked(null)).toBe(false);
    expect(decodeLostKey({ key: "-9223372036854775808" })).toBe(-(2n ** 63n));
    expect(decodePid([{ pid: 4711 }])).toBe(4711);
  });

  it("permit answers: the acquire's, a waiter's check, a downgrade's, holders and grant notices", () => {
    expect(decodePermitAcquire("g1764590400123456 1764590400123457")).toEqual({
      kind: "granted",
      id: TOKEN,
      token: TOKEN + 1n,
    });
    expect(decodePermitAcquire("g1764590400123456 0")).toMatchObject({ token: 0n });
    expect(decodePermitAcquire("w1764590400123456")).toEqual({ kind: "waiting", id: TOKEN });
    expect(decodePermitAcquire("n")).toEqual({ kind: "refused" });
    expect(decodePermitAcquire("l2147483647")).toEqual({ kind: "limit", stored: 2_147_483_647 });
    expect(decodePermitAcquire("s")).toEqual({ kind: "session-key-taken" });
    expect(() => decodePermitAcquire(null)).toThrow();
    expect(decodePermitCheck("g1764590400123456")).toBe(TOKEN);
    expect(decodePermitCheck("w")).toBe("waiting");
    expect(decodePermitCheck("x")).toBe("gone");
    expect(decodePermitDowngrade("1764590400123456")).toBe(TOKEN);
    expect(decodePermitDowngrade(null)).toBeNull();
    expect(
      decodePermitHolders([
        { owner: "o1", token: "1764590400123456", value: null, permits: 2, mode: "permit" },
        { owner: "o2", token: "0", value: "v", permits: 1, mode: "read" },
      ]),
    ).toEqual([
      { ownerId: "o1", token: TOKEN, permits: 2, mode: "permit" },
      { ownerId: "o2", token: 0n, value: "v", permits: 1, mode: "read" },
    ]);
    expect(decodePermitNotice("1764590400123456 1764590400123460")).toEqual([TOKEN, TOKEN + 4n]);
    expect(decodePermitNotice("x")).toBeNull();
    expect(decodePermitNotice(undefined)).toBeNull();
  });

  it("values: keys and tags to unlock, keys and tokens of holder rows, as decimal strings", () => {
    const use = { tag: 5 };
    expect(
      unlockHeldValues([
        { key: -1n, tokenKept: true, use },
        { key: 2n ** 62n, tokenKept: false, use: { tag: 7 } },
      ]),
    ).toEqual([["-1", "4611686018427387904"], ["5"]]);
    expect(holderRowValues([{ key: -3n, token: TOKEN }])).toEqual([["-3"], ["1764590400123456"]]);
  });
});

describeBackend("postgres", (url) => {
  describe("postgres codec, with the server's own values", () => {
    const client = new pg.Client({ connectionString: url });
    const other = new pg.Client({ connectionString: url });
    client.on("error", () => undefined);
    other.on("error", () => undefined);
    const sql = statements(schemaNames('"baton"'));
    beforeAll(async () => {
      await client.connect();
      await other.connect();
      await migrate(client);
    });
    afterAll(async () => {
      await client.end();
      await other.end();
    });

    /** The token column the token-kept acquire's expression gives for `token` and `base`. */
    const column = async (tag: number, token: bigint | null, base: bigint) => {
      const text = `SELECT ${keptTokenColumn("$1")} FROM (SELECT $2::bigint AS token, $3::bigint AS base) t`;
      return callPrepared(client, { name: "codec_kept_token_column", text }, [
        String(tag),
        token?.toString() ?? null,
        base.toString(),
      ]);
    };

    it("encodes the token when its token lock was taken, the record mark when it was not", async () => {
      const base = TOKEN - 1_000n;
      const tag = 1_000 + Math.floor(Math.random() * 1_000_000);
      expect(await column(tag, null, base)).toBeNull();
      const kept = await column(tag, TOKEN, base);
      expect(kept).toBe("1764590400123456");
      expect(recordNeeded(kept as string)).toBe(false);
      expect(grantedToken(kept as string)).toBe(TOKEN);
      // The token lock (tag, offset) is in pg_locks; its objid decodes to the token.
      const { rows } = await client.query(
        `SELECT l.classid::bigint AS tag, (${tokenFromOffsetSql("l.objid", "$2::bigint")})::text AS token
         FROM pg_locks l WHERE l.pid = pg_backend_pid() AND l.locktype = 'advisory'
           AND l.objsubid = 2 AND l.classid = $1::bigint::oid`,
        [tag, base.toString()],
      );
      expect(rows).toEqual([{ tag: String(tag), token: TOKEN.toString() }]);
      await client.query(
        `SELECT pg_advisory_unlock_shared($1::int, ${tokenOffsetSql("$2::bigint", "$3::bigint")})`,
        [tag, TOKEN.toString(), base.toString()],
      );
      // An offset past an int4, or before the start: the holder row must be recorded.
      for (const token of [base + TOKEN_LOCK_LIMIT, base - 1n]) {
        const recorded = (await column(tag, token, base)) as string;
        expect(recorded).toBe(`r${token}`);
        expect(recordNeeded(recorded)).toBe(true);
        expect(tokenToRecord(recorded)).toBe(token);
      }
      // Another connection holds the pair exclusively.
      await other.query(
        `SELECT pg_advisory_lock($1::int, ${tokenOffsetSql("$2::bigint", "$3::bigint")})`,
        [tag, TOKEN.toString(), base.toString()],
      );
      expect(await column(tag, TOKEN, base)).toBe("r1764590400123456");
      await other.query("SELECT pg_advisory_unlock_all()");
    });

    it("the statements' answers: acquire, holder, renewal and release, as the session reads them", async () => {
      const key = advisoryKey("codec", randomUUID());
      const tag = tokenTag(key);
      const registered = await client.query({ ...sql.register, values: ["60000", "codec-owner"] });
      expect(decodePid(registered.rows)).toBeGreaterThan(0);
      const acquired = await callPrepared(client, sql.acquireTokenKept, [
        key.toString(),
        String(tag),
      ]);
      const token = grantedToken(acquired as string);
      expect(token).toBeGreaterThan(0n);
      const refused = await callPrepared(other, sql.acquireTokenKept, [
        key.toString(),
        String(tag),
      ]);
      expect(refused).toBeNull();
      const holder = await other.query({ ...sql.holder, values: [key.toString(), tag] });
      // The holder's connection is idle: its TTL (60 s) less how long it has been idle.
      const read = decodeHolder(holder.rows);
      expect(read).toEqual({ ownerId: "codec-owner", token, remainingMs: expect.any(Number) });
      expect(read?.remainingMs).toBeGreaterThan(0);
      expect(read?.remainingMs).toBeLessThanOrEqual(60_000);
      // The renewal names the keys this connection no longer holds.
      const gone = advisoryKey("codec", randomUUID());
      const renewed = await client.query({
        ...sql.renew,
        values: [[key.toString(), gone.toString()], ...holderRowValues([])],
      });
      expect(renewed.rows.map(decodeLostKey)).toEqual([gone]);
      const released = await callPrepared(client, sql.releaseTokenKept, [
        key.toString(),
        token.toString(),
        String(tag),
      ]);
      expect(decodeUnlocked(released)).toBe(true);
      const again = await callPrepared(client, sql.release, [key.toString()]);
      expect(decodeUnlocked(again)).toBe(false);
      const none = await other.query({ ...sql.holder, values: [key.toString(), tag] });
      expect(decodeHolder(none.rows)).toBeNull();
    });
  });
});
