import { randomUUID } from "node:crypto";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { describeBackend } from "@baton/conformance/harness";
import { ConfigError, createCoordinator, parseBackendUrl } from "@baton/core";
import { afterEach, describe, expect, it } from "vitest";
import {
  createLockTable,
  DynamoDBBackend,
  type DynamoDBSession,
  dynamodbOptionsFromUrl,
} from "../src/index.js";

const never = () => new AbortController().signal;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describeBackend("dynamodb", (url) => {
  // Parsed when a test runs: a skipped block is declared with no URL.
  let parsed: ReturnType<typeof dynamodbOptionsFromUrl> | undefined;
  const opts = () => {
    parsed ??= dynamodbOptionsFromUrl(parseBackendUrl(url));
    return parsed;
  };
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
  });

  /** A client on the harness's dynalite that lists the requests it sends: operation and key. */
  const countingClient = () => {
    const client = new DynamoDBClient({
      endpoint: opts().endpoint as string,
      region: "us-east-1",
      credentials: opts().credentials as { accessKeyId: string; secretAccessKey: string },
    });
    const sent: string[] = [];
    client.middlewareStack.add(
      (next, context) => (args) => {
        const key = (args.input as { Key?: { pk?: { S?: string } } }).Key?.pk?.S;
        sent.push(
          key === undefined ? String(context.commandName) : `${context.commandName} ${key}`,
        );
        return next(args);
      },
      { step: "initialize" },
    );
    cleanups.push(async () => client.destroy());
    return { client, sent };
  };
  const backendOn = (client: DynamoDBClient, table = opts().table) => {
    const backend = new DynamoDBBackend({ table, client, createTable: true });
    cleanups.push(() => backend.close());
    return backend;
  };

  describe("dynamodb table", () => {
    it("a missing table is a ConfigError that says how to create it, not a hang", async () => {
      const table = `missing-${randomUUID().slice(0, 8)}`;
      const backend = new DynamoDBBackend({ ...opts(), table, createTable: false });
      cleanups.push(() => backend.close());
      const error = await backend.openSession({ ttlMs: 2_000, ownerId: "a" }).catch((e) => e);
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).field).toBe("table");
      expect((error as Error).message).toContain(`"${table}"`);
      expect((error as Error).message).toContain("createLockTable");
    });

    it("createTable creates a missing table on first use; createLockTable leaves an existing one", async () => {
      const table = `created-${randomUUID().slice(0, 8)}`;
      const { client } = countingClient();
      const backend = backendOn(client, table);
      const session = await backend.openSession({ ttlMs: 2_000, ownerId: "a" });
      const grant = await session.acquire("a", { wait: false, signal: never() });
      expect(grant?.token).toBe(1n);
      await createLockTable(client, table);
      expect(await session.holder("a")).toMatchObject({ ownerId: "a", token: 1n });
    });
  });

  describe("dynamodb sessions", () => {
    it("one renewal request renews a session holding 20 locks", async () => {
      const { client, sent } = countingClient();
      const session = (await backendOn(client).openSession({
        ttlMs: 2_000,
        ownerId: "many",
      })) as DynamoDBSession;
      const run = randomUUID().slice(0, 8);
      for (let i = 0; i < 20; i++) {
        expect(
          await session.acquire(`many-${run}-${i}`, { wait: false, signal: never() }),
        ).not.toBe(null);
      }
      sent.length = 0;
      await session.keepAlive();
      expect(sent).toEqual([`UpdateItemCommand session:${session.sessionId}`]);
    });

    it("a waiter on a live holder only reads, and at most a few times a second", async () => {
      const { client, sent } = countingClient();
      const name = `held-${randomUUID().slice(0, 8)}`;
      const holder = createCoordinator({ url, ttlMs: 1_500 });
      cleanups.push(() => holder.close());
      await holder.acquire(name);
      const waiter = createCoordinator({ backend: backendOn(client), ttlMs: 1_500 });
      cleanups.push(() => waiter.close());
      await waiter.holder(name); // session open
      sent.length = 0;
      const waitMs = 3_000;
      await expect(waiter.acquire(name, { waitMs })).rejects.toThrow(/LockTimeout|within/);
      const looks = sent.filter((c) => c === "BatchGetItemCommand").length;
      // One conditional grant at the start, then reads only (and the waiter's own renewals),
      // 250 to 500 ms apart once backed off.
      const lockWrites = sent.filter((c) => /^(Update|Delete)ItemCommand lock:/.test(c));
      expect(lockWrites).toEqual([`UpdateItemCommand lock:${name}`]);
      expect(looks).toBeGreaterThanOrEqual(3);
      expect(looks).toBeLessThanOrEqual(Math.ceil(waitMs / 125));
    });

    it("a grant whose reply was lost, or a release that never arrived, is released after the next renewal", async () => {
      const { client } = countingClient();
      // The next write to a lock item: its reply is lost (the table applied it), or the request.
      let lose: "reply" | "request" | undefined;
      client.middlewareStack.add(
        (next) => async (args) => {
          const key = (args.input as { Key?: { pk?: { S?: string } } }).Key?.pk?.S ?? "";
          const losing = key.startsWith("lock:") ? lose : undefined;
          if (losing !== undefined) lose = undefined;
          const hangUp = () => Object.assign(new Error("socket hang up"), { name: "TimeoutError" });
          if (losing === "request") throw hangUp();
          const result = await next(args);
          if (losing === "reply") throw hangUp();
          return result;
        },
        { step: "initialize" },
      );
      const backend = backendOn(client);
      const deaf = await backend.openSession({ ttlMs: 60_000, ownerId: "deaf" });
      const other = await backend.openSession({ ttlMs: 60_000, ownerId: "other" });
      const name = `lost-reply-${randomUUID().slice(0, 8)}`;
      const tryOther = () => other.acquire(name, { wait: false, signal: never() });
      const freedAfterRenewal = async () => {
        await deaf.keepAlive();
        for (let i = 0; i < 40; i++) {
          const grant = await tryOther();
          if (grant !== null) return grant;
          await sleep(50);
        }
        return null;
      };

      lose = "reply";
      await expect(deaf.acquire(name, { wait: false, signal: never() })).rejects.toThrow(
        /socket hang up/,
      );
      expect(await deaf.holder(name)).toMatchObject({ ownerId: "deaf" }); // granted after all
      expect(await tryOther()).toBeNull();
      const taken = await freedAfterRenewal();
      expect(taken).not.toBeNull();
      await other.release(taken as NonNullable<typeof taken>);

      const grant = await deaf.acquire(name, { wait: false, signal: never() });
      expect(grant).not.toBeNull();
      lose = "request";
      await expect(deaf.release(grant as NonNullable<typeof grant>)).rejects.toThrow(
        /socket hang up/,
      );
      expect(await tryOther()).toBeNull();
      expect(await freedAfterRenewal()).not.toBeNull();
    });

    it("a holder found expired loses every lock at once: its other locks are free to a single try", async () => {
      const { client } = countingClient();
      const backend = backendOn(client);
      const frozen = await backend.openSession({ ttlMs: 1_000, ownerId: "frozen" });
      const run = randomUUID().slice(0, 8);
      const names = [0, 1, 2].map((i) => `frozen-${run}-${i}`);
      const grants = [];
      for (const name of names)
        grants.push(await frozen.acquire(name, { wait: false, signal: never() }));
      const other = await backend.openSession({ ttlMs: 5_000, ownerId: "other" });
      const started = performance.now();
      const first = await other.acquire(names[0] as string, { wait: true, signal: never() });
      expect(performance.now() - started).toBeGreaterThanOrEqual(900);
      expect(first?.token).toBeGreaterThan(grants[0]?.token ?? 0n);
      await sleep(10);
      for (const name of names.slice(1)) {
        expect(await other.acquire(name, { wait: false, signal: never() })).not.toBeNull();
      }
      await expect(frozen.keepAlive()).rejects.toThrow(/session item is gone/);
      expect(frozen.lost?.aborted).toBe(true);
    });
  });
});
