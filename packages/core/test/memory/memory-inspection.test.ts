import { describe, expect, it } from "vitest";
import {
  type BackendSession,
  type KeySpace,
  ManualClock,
  MemoryBackend,
  READ_WRITE_LIMIT,
} from "../../src/index.js";

const TTL_MS = 3_000;
const signal = new AbortController().signal;

async function sessions(count: number) {
  const clock = new ManualClock();
  const backend = new MemoryBackend({ clock });
  const opened: BackendSession[] = [];
  for (let i = 0; i < count; i++) {
    opened.push(await backend.openSession({ ttlMs: TTL_MS, ownerId: `owner-${i}` }));
  }
  return { clock, backend, sessions: opened };
}

/** Every key of `space` under `prefix`, page by page. */
async function allKeys(
  session: BackendSession,
  space: KeySpace,
  prefix: string,
  limit: number,
): Promise<{ keys: string[]; pages: number }> {
  const keys: string[] = [];
  let pages = 0;
  let cursor: string | undefined;
  do {
    const page = await (session.listKeys as NonNullable<BackendSession["listKeys"]>)({
      space,
      prefix,
      limit,
      signal,
      ...(cursor === undefined ? {} : { cursor }),
    });
    pages++;
    expect(page.keys.length).toBeLessThanOrEqual(limit);
    keys.push(...page.keys);
    cursor = page.cursor;
  } while (cursor !== undefined);
  return { keys, pages };
}

describe("the memory backend lists its keys page by page", () => {
  it("each key of each space once, filtered by prefix, in pages of at most limit", async () => {
    const {
      sessions: [a],
    } = await sessions(1);
    const s = a as BackendSession;
    for (let i = 0; i < 25; i++) {
      await s.acquire(`jobs/${String(i).padStart(2, "0")}`, { wait: false, signal });
    }
    await s.acquire("other", { wait: false, signal });
    await s.acquirePermits?.("jobs/pool", {
      wait: false,
      signal,
      limit: 3,
      permits: 1,
      mode: "permit",
    });
    await s.writeRecord?.("jobs/x/slot/1", "{}", null);

    const locks = await allKeys(s, "lock", "jobs/", 10);
    expect(locks.pages).toBe(3);
    expect(locks.keys).toHaveLength(25);
    expect(new Set(locks.keys).size).toBe(25);
    expect((await allKeys(s, "lock", "", 1000)).keys).toHaveLength(26);
    expect((await allKeys(s, "permit", "jobs/", 10)).keys).toEqual(["jobs/pool"]);
    expect((await allKeys(s, "record", "jobs/", 10)).keys).toEqual(["jobs/x/slot/1"]);
  });

  it("a key released between pages neither repeats nor hides the others", async () => {
    const {
      sessions: [a],
    } = await sessions(1);
    const s = a as BackendSession;
    const grants = [];
    for (const key of ["a", "b", "c", "d"]) {
      grants.push(await s.acquire(key, { wait: false, signal }));
    }
    const list = (s.listKeys as NonNullable<BackendSession["listKeys"]>).bind(s);
    const first = await list({ space: "lock", prefix: "", limit: 2, signal });
    expect(first.keys).toEqual(["a", "b"]);
    await s.release(grants[0] as NonNullable<(typeof grants)[0]>);
    const second = await list({
      space: "lock",
      prefix: "",
      limit: 2,
      signal,
      cursor: first.cursor as string,
    });
    expect(second.keys).toEqual(["c", "d"]);
  });
});

describe("the memory backend inspects a key", () => {
  it("a lock's holder with its lease and time held, and its waiters in queue order", async () => {
    const {
      clock,
      sessions: [a, b],
    } = await sessions(2);
    const grant = await (a as BackendSession).acquire("invoices", {
      wait: false,
      value: "v",
      signal,
    });
    const waiting = (b as BackendSession).acquire("invoices", { wait: true, signal });
    await clock.advance(100);
    const state = await (a as BackendSession).inspectKey?.("lock", "invoices");
    expect(state).toEqual({
      holders: [
        { ownerId: "owner-0", token: grant?.token, value: "v", heldMs: 100, remainingMs: 2_900 },
      ],
      waiters: { count: 1, ownerIds: ["owner-1"] },
    });
    await (a as BackendSession).release(grant as NonNullable<typeof grant>);
    await waiting;
  });

  it("an expired holder counts as free", async () => {
    const {
      clock,
      sessions: [a],
    } = await sessions(1);
    await (a as BackendSession).acquire("invoices", { wait: false, signal });
    await clock.advance(TTL_MS + 1);
    expect(await (a as BackendSession).inspectKey?.("lock", "invoices")).toBeNull();
  });

  it("a permit key's grants, waiters and limit", async () => {
    const {
      sessions: [a, b],
    } = await sessions(2);
    const write = {
      wait: false,
      signal,
      limit: READ_WRITE_LIMIT,
      permits: 1,
      mode: "read" as const,
    };
    await (a as BackendSession).acquirePermits?.("catalog", write);
    const waiting = (b as BackendSession).acquirePermits?.("catalog", {
      ...write,
      wait: true,
      permits: READ_WRITE_LIMIT,
      mode: "write",
    });
    const state = await (a as BackendSession).inspectKey?.("permit", "catalog");
    expect(state).toMatchObject({
      holders: [{ ownerId: "owner-0", permits: 1, mode: "read", token: 0n }],
      waiters: { count: 1, ownerIds: ["owner-1"] },
      limit: READ_WRITE_LIMIT,
    });
    await (a as BackendSession).close();
    await waiting;
  });
});

describe("the memory backend force-releases one grant", () => {
  it("frees it for the next waiter and reports it to the holder's next renewal, once", async () => {
    const {
      sessions: [a, b, ops],
    } = await sessions(3);
    const grant = await (a as BackendSession).acquire("invoices", { wait: false, signal });
    const token = grant?.token as bigint;
    const waiting = (b as BackendSession).acquire("invoices", { wait: true, signal });
    const freed = await (ops as BackendSession).forceRelease?.("lock", "invoices", {
      token,
      reason: "stuck",
      signal,
    });
    expect(freed).toBe(true);
    expect((await waiting)?.token).toBeGreaterThan(token);
    expect(await (a as BackendSession).keepAlive()).toEqual({
      revoked: [{ space: "lock", key: "invoices", token, reason: "stuck" }],
    });
    expect(await (a as BackendSession).keepAlive()).toBeUndefined();
    // A later grant is never freed by the old token.
    expect(
      await (ops as BackendSession).forceRelease?.("lock", "invoices", {
        token,
        reason: "again",
        signal,
      }),
    ).toBe(false);
  });
});
