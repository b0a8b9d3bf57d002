import {
  type BackendSession,
  encodeJobRecord,
  type JobRecord,
  LockLostError,
  type RunContext,
} from "@baton/core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { SuiteContext } from "../suite-context.js";
import type { ConformanceTarget } from "../target.js";

const SLOT = "2026-12-01T02:00:00Z";

/** A backend with records, and a way to delete one the way a store losing data would. */
export interface RecordLossTarget extends ConformanceTarget {
  /**
   * Deletes the durable record `key` (as given to `writeRecord`) from the store, and nothing
   * else, as a store losing data would (a truncated table, a deleted node or item).
   */
  deleteRecord(key: string): Promise<void>;
}

/**
 * Registers, with vitest, the tests of records a store lost (call it at the top level of a
 * test file): a record deleted with `target.deleteRecord` and written again by a newer writer
 * never takes a write that expects a version from before the deletion, from a raw session or
 * from a `runOnce` attempt that started before it, and the newer attempt records its outcome.
 * For a backend whose guarantees declare `records`; the tests skip, saying why, on one
 * without.
 *
 * @example
 * runRecordLoss({ name: "etcd", ttlMs: 2_000, createBackend, deleteRecord: (key) => ... });
 */
export function runRecordLoss(target: RecordLossTarget): void {
  const ctx = new SuiteContext(target);
  describe(`conformance: ${target.name}`, () => {
    beforeAll(async () => {
      await ctx.start();
    });
    afterEach(async () => {
      await ctx.cleanup();
    });
    afterAll(async () => {
      await ctx.stop();
    });
    recordLossGroup(ctx, (key) => target.deleteRecord(key));
  });
}

/**
 * A record the store lost (a truncated table, a deleted node or item, a restored backup) and
 * that a newer writer then created again: a write expecting a version from before the loss
 * never lands on the newer record, whether it comes from a raw session or from the first
 * outcome write of a `runOnce` attempt that started before the loss, and the newer attempt
 * records its own outcome. `deleteRecord` deletes a record in the store under test.
 */
export function recordLossGroup(
  ctx: SuiteContext,
  deleteRecord: (key: string) => Promise<void>,
): void {
  describe("records after the store lost one", () => {
    const withRecords = (title: string, test: () => Promise<void>) =>
      it(title, async ({ skip }) => {
        if (!ctx.backend.guarantees.records) skip(`${ctx.target.name} keeps no durable records`);
        await test();
      });

    withRecords(
      "a record deleted and created again takes no write that expects a version from before the deletion",
      async () => {
        const key = ctx.name("lost-record");
        const older = records(await ctx.session());
        const newer = records(await ctx.session());
        const seen: string[] = [];
        let expected: string | null = null;
        for (let round = 0; round < 3; round++) {
          // Versions from a create and from updates, as an attempt sees them.
          for (let write = 0; write < 3; write++) {
            const version: string | null = await older.write(
              key,
              `older ${round}.${write}`,
              expected,
            );
            expect(version, `write ${write} of round ${round}`).not.toBeNull();
            expected = version;
            seen.push(version as string);
          }
          await deleteRecord(key);
          expect(await newer.read(key)).toBeNull();
          const fresh = await newer.write(key, `newer ${round}`, null);
          expect(fresh).not.toBeNull();
          for (const stale of seen) {
            expect(
              await older.write(key, `stale ${round}`, stale),
              `expecting ${stale}`,
            ).toBeNull();
          }
          expect(await newer.read(key)).toEqual({ value: `newer ${round}`, version: fresh });
          const next = await newer.write(key, `newer ${round}, updated`, fresh);
          expect(next).not.toBeNull();
          expect(await newer.read(key)).toEqual({
            value: `newer ${round}, updated`,
            version: next,
          });
          await deleteRecord(key);
          expected = null;
          seen.push(fresh as string, next as string);
        }
      },
    );

    withRecords(
      "runOnce: an attempt whose slot record was deleted mid-run does not overwrite the record a newer attempt wrote since, and the newer one records its outcome",
      async () => {
        const a = ctx.coordinator({ ownerId: "replica-a" });
        const job = ctx.name("lost-slot");
        const key = `${job}/slot/${SLOT}`;
        const gate = opened<bigint>();
        const running = a.runOnce(job, SLOT, async (run: RunContext) => {
          gate.started(run.token);
          await gate.closed;
          return "older";
        });
        const olderToken = await gate.running;
        // The store loses the slot's record while the attempt runs; a newer attempt (a greater
        // token) takes the slot and records its start.
        await deleteRecord(key);
        const newer = records(await ctx.session());
        const newerRecord: JobRecord = {
          state: "running",
          attempt: 1,
          token: olderToken + 1n,
          holder: "replica-b",
          startedAt: Date.now(),
        };
        const started = await newer.write(key, encodeJobRecord(newerRecord), null);
        expect(started).not.toBeNull();
        gate.open();
        const result = await running;
        expect(result).toMatchObject({ outcome: "failed", attempt: 1 });
        expect(result.outcome === "failed" && result.error).toBeInstanceOf(LockLostError);
        expect(await newer.read(key)).toEqual({
          value: encodeJobRecord(newerRecord),
          version: started,
        });
        const done = encodeJobRecord({ ...newerRecord, state: "done", endedAt: Date.now() });
        expect(await newer.write(key, done, started)).not.toBeNull();
        expect(await a.runOnce(job, SLOT, () => "ran again")).toMatchObject({
          outcome: "already-done",
          record: { state: "done", holder: "replica-b", token: olderToken + 1n },
        });
      },
    );

    withRecords(
      "runOnce: a write from before the slot's record was deleted does not land on the record of the attempt now running, which then records ran",
      async () => {
        const job = ctx.name("lost-slot");
        const key = `${job}/slot/${SLOT}`;
        const older = records(await ctx.session());
        const olderRecord: JobRecord = {
          state: "running",
          attempt: 1,
          token: 1n,
          holder: "replica-a",
          startedAt: Date.now(),
        };
        const created = await older.write(key, encodeJobRecord(olderRecord), null);
        expect(created).not.toBeNull();
        await deleteRecord(key);
        const b = ctx.coordinator({ ownerId: "replica-b" });
        const gate = opened<bigint>();
        const running = b.runOnce(job, SLOT, async (run: RunContext) => {
          gate.started(run.token);
          await gate.closed;
          return "newer";
        });
        const newerToken = await gate.running;
        // The older attempt's first outcome write, against the version it saw before the loss.
        const late = encodeJobRecord({ ...olderRecord, state: "done", endedAt: Date.now() });
        expect(await older.write(key, late, created)).toBeNull();
        gate.open();
        expect(await running).toMatchObject({ outcome: "ran", value: "newer", attempt: 1 });
        expect(await b.runOnce(job, SLOT, () => "ran again")).toMatchObject({
          outcome: "already-done",
          record: { state: "done", holder: "replica-b", token: newerToken },
        });
      },
    );
  });
}

/** A session's record calls. */
function records(session: BackendSession) {
  const { readRecord, writeRecord } = session;
  if (readRecord === undefined || writeRecord === undefined) {
    throw new Error("conformance: a backend with records has readRecord and writeRecord");
  }
  return {
    read: (key: string) => readRecord.call(session, key),
    write: (key: string, value: string, expected: string | null) =>
      writeRecord.call(session, key, value, expected),
  };
}

/** A job that reports when it runs (with a value) and waits until the test opens the gate. */
function opened<T>() {
  let started: (value: T) => void = () => undefined;
  let open: () => void = () => undefined;
  const running = new Promise<T>((resolve) => {
    started = resolve;
  });
  const closed = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { running, closed, started: (value: T) => started(value), open: () => open() };
}
