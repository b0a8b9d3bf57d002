import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import {
  type BackendSession,
  type Coordinator,
  createCoordinator,
  type Grant,
  LockLostError,
  parseBackendUrl,
} from "@baton/core";
import { afterEach, expect, it, vi } from "vitest";
import { decodeRevocationNotes, MAX_NOTE_REASON } from "../src/azure-blob-codec.js";
import { sessionBlobName } from "../src/azure-blob-keys.js";
import { azureBlobOptionsFromUrl, resolveAzureBlobOptions } from "../src/azure-blob-options.js";
import { AZURE_BLOB_GUARANTEES, AzureBlobBackend, type AzureBlobSession } from "../src/index.js";

const TTL = 2_000;

/** The calls the tests make on one blob of the container. */
interface AdminBlob {
  delete(): Promise<unknown>;
  getProperties(): Promise<{ metadata?: Record<string, string> }>;
}

describeBackend("azure-blob", (url) => {
  const admin = resolveAzureBlobOptions(azureBlobOptionsFromUrl(parseBackendUrl(url)));
  const blob = (name: string) => admin.container.getBlockBlobClient(name) as AdminBlob;
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
  });

  /** A backend on its own blob name prefix, closed after the test. */
  function backendOn(prefix: string): AzureBlobBackend {
    const backend = new AzureBlobBackend({
      ...azureBlobOptionsFromUrl(parseBackendUrl(url)),
      prefix,
    });
    cleanups.push(() => backend.close());
    return backend;
  }

  async function open(backend: AzureBlobBackend, ownerId: string): Promise<AzureBlobSession> {
    return (await backend.openSession({ ttlMs: TTL, ownerId })) as AzureBlobSession;
  }

  async function take(session: BackendSession, name: string, value?: string): Promise<Grant> {
    const grant = await session.acquire(name, {
      wait: false,
      signal: new AbortController().signal,
      ...(value === undefined ? {} : { value }),
    });
    if (grant === null) throw new Error(`"${name}" was not free`);
    return grant;
  }

  /** Every key of a space under `prefix`, page by page; fails when a page is over `limit`. */
  async function listAll(
    session: BackendSession,
    space: "lock" | "permit" | "record",
    prefix: string,
    limit: number,
  ): Promise<{ keys: string[]; pages: number }> {
    const keys: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await session.listKeys?.({
        space,
        prefix,
        limit,
        signal: new AbortController().signal,
        ...(cursor === undefined ? {} : { cursor }),
      });
      if (page === undefined) throw new Error("listKeys is missing");
      expect(page.keys.length).toBeLessThanOrEqual(limit);
      keys.push(...page.keys);
      cursor = page.cursor;
      pages++;
    } while (cursor !== undefined);
    return { keys: keys.sort(), pages };
  }

  it("declares inspection and a forced release of one grant", () => {
    expect(AZURE_BLOB_GUARANTEES.inspection).toBe(true);
    expect(AZURE_BLOB_GUARANTEES.forceRelease).toBe("grant");
  });

  it("lists leased lock keys and record keys under its own prefix, a bounded page at a time", async () => {
    const prefix = `ins-${randomUUID()}/`;
    const backend = backendOn(prefix);
    const other = backendOn(`other-${randomUUID()}/`);
    const a = await open(backend, "a");
    const elsewhere = await open(other, "x");
    for (const name of ["jobs/1", "jobs/2", "jobs/3", "jobs/4", "jobs/5", "mail", "jöbs/ü"]) {
      await take(a, name);
    }
    await a.release(await take(a, "jobs/6"));
    await take(elsewhere, "jobs/9");
    expect(await a.writeRecord?.("jobs/r", "v", null)).not.toBeNull();

    const jobs = await listAll(a, "lock", "jobs/", 2);
    // A released lock keeps its blob (and its counter) but no lease: not listed.
    expect(jobs.keys).toEqual(["jobs/1", "jobs/2", "jobs/3", "jobs/4", "jobs/5"]);
    expect(jobs.pages).toBeGreaterThan(2);
    expect((await listAll(a, "lock", "", 1000)).keys).toEqual([
      "jobs/1",
      "jobs/2",
      "jobs/3",
      "jobs/4",
      "jobs/5",
      "jöbs/ü",
      "mail",
    ]);
    expect((await listAll(a, "lock", "jö", 10)).keys).toEqual(["jöbs/ü"]);
    expect((await listAll(a, "record", "", 3)).keys).toEqual(["jobs/r"]);
    expect((await listAll(a, "permit", "", 10)).keys).toEqual([]);
  });

  it("inspects a held lock, one with a waiter, a free one, a permit key and an expired holder", async () => {
    const backend = backendOn(`ins-${randomUUID()}/`);
    const a = await open(backend, "owner-a");
    // Another process's view: its own backend, so it has seen no heartbeat yet.
    const b = await open(backendOn(backend.prefix), "owner-b");
    const grant = await take(a, "held", "http://a");
    const state = await b.inspectKey?.("lock", "held");
    expect(state?.holders).toHaveLength(1);
    const holder = state?.holders[0];
    expect(holder).toMatchObject({ ownerId: "owner-a", token: grant.token, value: "http://a" });
    expect(holder?.remainingMs).toBeGreaterThan(0);
    expect(holder?.remainingMs).toBeLessThanOrEqual(TTL);
    // Azure's clock, in whole seconds: just granted.
    expect(holder?.heldMs).toBeGreaterThanOrEqual(0);
    expect(holder?.heldMs).toBeLessThan(60_000);
    // Waiters poll without writing: the holder is shown, the waiters are not known.
    const waiting = new AbortController();
    const wait = b.acquire("held", { wait: true, signal: waiting.signal });
    const whileWaited = await a.inspectKey?.("lock", "held");
    expect(whileWaited?.holders.map((h) => h.ownerId)).toEqual(["owner-a"]);
    expect(whileWaited?.waiters).toBeUndefined();
    waiting.abort(new Error("stop waiting"));
    await expect(wait).rejects.toThrow("stop waiting");

    expect(await b.inspectKey?.("lock", "never-taken")).toBeNull();
    expect(await b.inspectKey?.("permit", "held")).toBeNull();
    await a.release(grant);
    expect(await b.inspectKey?.("lock", "held")).toBeNull();

    // A holder that stops renewing counts as free once its whole TTL has passed unseen; to a
    // process that never saw it renew, once its heartbeat is older than its TTL by Azure's
    // clock (whole seconds).
    const c = await open(backend, "owner-c");
    await take(c, "stuck");
    expect((await b.inspectKey?.("lock", "stuck"))?.holders[0]?.ownerId).toBe("owner-c");
    await new Promise((resolve) => setTimeout(resolve, TTL + 2_000));
    const fresh = await open(backendOn(backend.prefix), "owner-d");
    expect(await fresh.inspectKey?.("lock", "stuck")).toBeNull();
    expect(await b.inspectKey?.("lock", "stuck")).toBeNull();
  });

  it("a forced release frees the grant in place: the waiter gets it promptly with a greater token, and the holder's renewal reports it revoked once", async () => {
    const backend = backendOn(`ins-${randomUUID()}/`);
    const holder = await open(backend, "holder");
    // The waiter and the operator in other processes: no wake-up within one process.
    const waiter = await open(backendOn(backend.prefix), "waiter");
    const operator = await open(backendOn(backend.prefix), "operator");
    const grant = await take(holder, "stuck");
    const other = await take(holder, "kept");
    expect(await holder.keepAlive()).toBeUndefined();
    const waited = waiter.acquire("stuck", { wait: true, signal: new AbortController().signal });
    const options = { reason: "deploy 42 is stuck", signal: new AbortController().signal };

    // A token that is not the holder's frees nothing.
    expect(
      await operator.forceRelease?.("lock", "stuck", { ...options, token: grant.token - 1n }),
    ).toBe(false);
    expect(await operator.forceRelease?.("lock", "stuck", { ...options, token: grant.token })).toBe(
      true,
    );
    const started = performance.now();
    const next = await waited;
    // The waiter polls at most every 500 ms: generous for a loaded machine.
    expect(performance.now() - started).toBeLessThan(TTL * 5);
    expect(next?.token).toBeGreaterThan(grant.token);
    // The same grant again, now that another holds the key: nothing to free.
    expect(await operator.forceRelease?.("lock", "stuck", { ...options, token: grant.token })).toBe(
      false,
    );

    expect(await holder.keepAlive()).toEqual({
      revoked: [{ space: "lock", key: "stuck", token: grant.token, reason: "deploy 42 is stuck" }],
    });
    // Reported once; the holder's other lock lives on; its late release frees nothing.
    expect(await holder.keepAlive()).toBeUndefined();
    expect(await holder.release(grant)).toBe(false);
    expect((await operator.inspectKey?.("lock", "stuck"))?.holders[0]?.ownerId).toBe("waiter");
    expect((await operator.inspectKey?.("lock", "kept"))?.holders[0]?.token).toBe(other.token);
    // The renewal that read the note rewrote the heartbeat without it.
    const heartbeat = await blob(sessionBlobName(backend.prefix, holder.sessionId)).getProperties();
    expect(decodeRevocationNotes(heartbeat.metadata)).toEqual([]);
  });

  it("a reason of any text reaches the holder, a long one cut to the note's limit", async () => {
    const backend = backendOn(`ins-${randomUUID()}/`);
    const holder = await open(backend, "holder");
    const operator = await open(backendOn(backend.prefix), "operator");
    const a = await take(holder, "ünïcode/lock");
    const b = await take(holder, "long");
    const signal = new AbortController().signal;
    const reason = "stuck: «ünïcode» 🔒\nsee the runbook";
    const long = "x".repeat(MAX_NOTE_REASON + 500);
    expect(
      await operator.forceRelease?.("lock", "ünïcode/lock", { token: a.token, reason, signal }),
    ).toBe(true);
    expect(
      await operator.forceRelease?.("lock", "long", { token: b.token, reason: long, signal }),
    ).toBe(true);
    const result = await holder.keepAlive();
    const byKey = new Map(result?.revoked?.map((r) => [r.key, r.reason]));
    expect(byKey.get("ünïcode/lock")).toBe(reason);
    expect(byKey.get("long")).toBe(long.slice(0, MAX_NOTE_REASON));
  });

  it("a forced release of a grant whose holder is gone frees the lock and resolves false", async () => {
    const backend = backendOn(`ins-${randomUUID()}/`);
    const holder = await open(backend, "holder");
    const operator = await open(backendOn(backend.prefix), "operator");
    const grant = await take(holder, "orphan");
    // The heartbeat gone (as after an expiry) while the lease is still there.
    await blob(sessionBlobName(backend.prefix, holder.sessionId)).delete();
    expect(
      await operator.forceRelease?.("lock", "orphan", {
        token: grant.token,
        reason: "cleanup",
        signal: new AbortController().signal,
      }),
    ).toBe(false);
    expect((await listAll(operator, "lock", "", 100)).keys).toEqual([]);
    expect((await take(operator, "orphan")).token).toBeGreaterThan(grant.token);
  });

  it("through the coordinator: the holder's lock signal aborts with revoked and the operator's reason, the waiter holds with a greater token", async () => {
    const prefix = `ins-${randomUUID()}/`;
    const [holder, waiter, operator] = ["holder", "waiter", "operator"].map((ownerId) => {
      const coordinator = createCoordinator({ backend: backendOn(prefix), ttlMs: TTL, ownerId });
      cleanups.push(() => coordinator.close());
      return coordinator;
    }) as [Coordinator, Coordinator, Coordinator];
    const lock = await holder.acquire("reports");
    const waited = waiter.acquire("reports", { waitMs: 30_000 });
    const result = await operator.forceRelease("reports", { reason: "stuck on a dead connection" });
    expect(result).toMatchObject({ released: true, token: lock.token });
    const next = await waited;
    expect(next.token).toBeGreaterThan(lock.token);
    // Within one renewal interval (a third of the TTL), generous for a loaded machine.
    await vi.waitFor(() => expect(lock.signal.aborted).toBe(true), { timeout: TTL * 5 });
    const lost = lock.signal.reason as LockLostError;
    expect(lost).toBeInstanceOf(LockLostError);
    expect(lost.reason).toBe("revoked");
    expect(lost.detail).toBe("stuck on a dead connection");
    const view = await operator.inspect("reports");
    expect(view?.holders.map((h) => [h.ownerId, h.token])).toEqual([["waiter", next.token]]);
    await next.release();
  });
});
