import { afterEach, describe, expect, it } from "vitest";
import {
  BackendUnavailableError,
  ConfigError,
  type Coordinator,
  createCoordinator,
  decodeJobRecord,
  encodeJobRecord,
  LockLostError,
  MemoryBackend,
  RunTimeoutError,
  type StoredRecord,
} from "../../src/index.js";
import type { RecordAccess } from "../../src/kernel/index.js";
import { runOnce, slotKey } from "../../src/recipes/run-once.js";
import { fakeRecipeHost } from "../support/recipe-host.js";

/** Records in a map, with a hook that runs before each write (to race another writer in). */
class MapRecords implements RecordAccess {
  readonly values = new Map<string, StoredRecord>();
  beforeWrite: ((key: string) => void) | undefined;
  failWrites = 0;
  #version = 0;

  async read(key: string): Promise<StoredRecord | null> {
    return this.values.get(key) ?? null;
  }

  async write(key: string, value: string, expected: string | null): Promise<string | null> {
    const hook = this.beforeWrite;
    this.beforeWrite = undefined;
    hook?.(key);
    if (this.failWrites > 0) {
      this.failWrites--;
      throw new BackendUnavailableError("store down");
    }
    if ((this.values.get(key)?.version ?? null) !== expected) return null;
    const version = String(++this.#version);
    this.values.set(key, { value, version });
    return version;
  }

  put(key: string, value: string): void {
    this.values.set(key, { value, version: String(++this.#version) });
  }

  record(key: string) {
    const stored = this.values.get(key);
    return stored === undefined ? undefined : decodeJobRecord(stored.value);
  }
}

const open: Coordinator[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
});

function hostWith(records: RecordAccess) {
  const coordinator = createCoordinator({ backend: new MemoryBackend(), ttlMs: 1_000 });
  open.push(coordinator);
  const host = fakeRecipeHost(coordinator, { records: async () => records });
  return { host, coordinator, reports: host.reports };
}

const KEY = slotKey("invoices", "2026-12-01");

describe("runOnce decides from the record under the slot's lock", () => {
  it("a slot finished by a faster replica between the first read and the grant does not run again", async () => {
    const records = new MapRecords();
    const { host } = hostWith(records);
    const fast = hostWith(records);
    // The fast replica runs and records done after this one's first read, before its grant.
    const original = records.read.bind(records);
    let reads = 0;
    records.read = async (key) => {
      const value = await original(key);
      if (++reads === 1) await runOnce(fast.host, "invoices", "2026-12-01", () => "fast", {});
      return value;
    };
    let ran = false;
    const result = await runOnce(
      host,
      "invoices",
      "2026-12-01",
      () => {
        ran = true;
      },
      {},
    );
    expect(ran).toBe(false);
    expect(result.outcome).toBe("already-done");
  });

  it("an attempt whose start write loses to a stale holder's outcome reads again and skips", async () => {
    const records = new MapRecords();
    const { host } = hostWith(records);
    records.put(
      KEY,
      encodeJobRecord({ state: "running", attempt: 1, token: 0n, holder: "old", startedAt: 1 }),
    );
    records.beforeWrite = (key) =>
      records.put(
        key,
        encodeJobRecord({
          state: "done",
          attempt: 1,
          token: 0n,
          holder: "old",
          startedAt: 1,
          endedAt: 2,
        }),
      );
    let ran = false;
    const result = await runOnce(
      host,
      "invoices",
      "2026-12-01",
      () => {
        ran = true;
      },
      {},
    );
    expect(ran).toBe(false);
    expect(result.outcome).toBe("already-done");
  });

  it("a record left running by a lock that ended is a crashed attempt: the next one is attempt 2", async () => {
    const records = new MapRecords();
    const { host } = hostWith(records);
    records.put(
      KEY,
      encodeJobRecord({ state: "running", attempt: 1, token: 0n, holder: "crashed", startedAt: 1 }),
    );
    const result = await runOnce(host, "invoices", "2026-12-01", ({ attempt }) => attempt, {});
    expect(result).toMatchObject({ outcome: "ran", value: 2, attempt: 2 });
    expect(records.record(KEY)).toMatchObject({ state: "done", attempt: 2 });
  });

  it("a crashed last attempt is recorded as failed and the slot as exhausted", async () => {
    const records = new MapRecords();
    const { host } = hostWith(records);
    records.put(
      KEY,
      encodeJobRecord({ state: "running", attempt: 3, token: 0n, holder: "crashed", startedAt: 1 }),
    );
    const result = await runOnce(host, "invoices", "2026-12-01", () => "never", { maxAttempts: 3 });
    expect(result.outcome).toBe("attempts-exhausted");
    expect(records.record(KEY)).toMatchObject({ state: "failed", attempt: 3 });
    expect(records.record(KEY)?.error).toMatch(/crashed.*without recording an outcome/);
  });

  it("an outcome the store fails to take is written again while the lock is held", async () => {
    const records = new MapRecords();
    const { host, reports } = hostWith(records);
    const result = await runOnce(
      host,
      "invoices",
      "2026-12-01",
      () => {
        records.failWrites = 2;
        return "billed";
      },
      {},
    );
    expect(result).toMatchObject({ outcome: "ran", value: "billed" });
    expect(records.record(KEY)).toMatchObject({ state: "done" });
    expect(reports).toHaveLength(2);
  });

  it("a run that finishes after a newer holder took the slot over fails with LockLostError", async () => {
    const records = new MapRecords();
    const { host } = hostWith(records);
    const result = await runOnce(
      host,
      "invoices",
      "2026-12-01",
      () => {
        records.beforeWrite = (key) =>
          records.put(
            key,
            encodeJobRecord({
              state: "running",
              attempt: 2,
              token: 99n,
              holder: "newer",
              startedAt: 1,
            }),
          );
        return "late";
      },
      {},
    );
    expect(result.outcome).toBe("failed");
    expect(result.outcome === "failed" && result.error).toBeInstanceOf(LockLostError);
    expect(records.record(KEY)).toMatchObject({ holder: "newer", token: 99n });
  });

  it("a retried outcome never overwrites a record a newer attempt wrote, even at the version it expects", async () => {
    const records = new MapRecords();
    const { host } = hostWith(records);
    const result = await runOnce(
      host,
      "invoices",
      "2026-12-01",
      () => {
        records.failWrites = 1;
        // The store loses its data and a newer attempt starts the slot, its record at the
        // version this attempt's outcome write expects (as a store whose versions restart).
        records.beforeWrite = (key) => {
          const expected = records.values.get(key)?.version ?? "";
          records.values.set(key, {
            value: encodeJobRecord({
              state: "running",
              attempt: 1,
              token: 99n,
              holder: "newer",
              startedAt: 1,
            }),
            version: expected,
          });
        };
        return "late";
      },
      {},
    );
    expect(result.outcome).toBe("failed");
    expect(result.outcome === "failed" && result.error).toBeInstanceOf(LockLostError);
    expect(records.record(KEY)).toMatchObject({ state: "running", holder: "newer", token: 99n });
  });

  it("a retried outcome whose earlier write reached the store is not written twice", async () => {
    const records = new MapRecords();
    const { host } = hostWith(records);
    const original = records.write.bind(records);
    let calls = 0;
    records.write = async (key, value, expected) => {
      const version = await original(key, value, expected);
      // The outcome write (the second write) lands, but its reply is lost.
      if (++calls === 2) throw new BackendUnavailableError("reply lost");
      return version;
    };
    const result = await runOnce(host, "invoices", "2026-12-01", () => "billed", {});
    expect(result).toMatchObject({ outcome: "ran", value: "billed" });
    expect(records.record(KEY)).toMatchObject({ state: "done" });
    expect(calls).toBe(2);
  });

  it("a run past atMostMs has its signal aborted with RunTimeoutError and is not awaited", async () => {
    const records = new MapRecords();
    const { host } = hostWith(records);
    let reason: unknown;
    const result = await runOnce(
      host,
      "invoices",
      "2026-12-01",
      ({ signal }) =>
        new Promise(() => {
          signal.addEventListener("abort", () => {
            reason = signal.reason;
          });
        }),
      { atMostMs: 50 },
    );
    expect(reason).toBeInstanceOf(RunTimeoutError);
    expect(result).toMatchObject({ outcome: "failed", attempt: 1, attemptsLeft: 2 });
    expect(records.record(KEY)).toMatchObject({ state: "failed", attempt: 1 });
  });

  it("a record key holding something else is a ConfigError, not overwritten", async () => {
    const records = new MapRecords();
    const { host } = hostWith(records);
    records.put(KEY, "not a record");
    await expect(runOnce(host, "invoices", "2026-12-01", () => 1, {})).rejects.toBeInstanceOf(
      ConfigError,
    );
    expect(records.values.get(KEY)?.value).toBe("not a record");
  });
});
