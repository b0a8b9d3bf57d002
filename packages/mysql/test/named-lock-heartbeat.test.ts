import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import type { BackendSession } from "@baton/core";
import { afterEach, describe, expect, it } from "vitest";
import { MysqlBackend } from "../src/index.js";

/** Acquires sent at once, ahead of the heartbeat, on the session's one connection. */
const QUEUED = 40;

describeBackend("mysql", (url) => {
  describe("mysql named-lock statements", () => {
    const backends: MysqlBackend[] = [];
    const open = async (): Promise<BackendSession> => {
      const backend = new MysqlBackend({ url });
      backends.push(backend);
      return backend.openSession({ ownerId: `heartbeat-${randomUUID()}`, ttlMs: 6_000 });
    };
    afterEach(async () => {
      await Promise.allSettled(backends.splice(0).map((b) => b.close()));
    });

    /**
     * Sends `QUEUED` acquires, then a heartbeat, and returns how many acquires had been
     * answered when the heartbeat was. A heartbeat that waited behind them all (each acquire
     * costs the server more the more named locks the connection holds) could miss its bound
     * and lose every lock of the session.
     */
    const answeredBeforeHeartbeat = async (session: BackendSession): Promise<number> => {
      const prefix = `queued-${randomUUID()}`;
      let answered = 0;
      const acquires = Array.from({ length: QUEUED }, (_, i) =>
        session
          .acquire(`${prefix}/${i}`, { wait: false, signal: new AbortController().signal })
          .then((grant) => {
            expect(grant).not.toBeNull();
            answered++;
          }),
      );
      let seen = -1;
      const heartbeat = session.keepAlive().then(() => {
        seen = answered;
      });
      await Promise.all([...acquires, heartbeat]);
      expect(answered).toBe(QUEUED);
      return seen;
    };

    it("a heartbeat is answered ahead of the acquires queued on the session's connection", async () => {
      const session = await open();
      expect(await answeredBeforeHeartbeat(session)).toBeLessThanOrEqual(1);
      await session.keepAlive();
      expect(session.lost?.aborted).toBe(false);
    });

    it("a heartbeat that has released grants' rows to delete is answered ahead of queued acquires", async () => {
      const session = await open();
      const grant = await session.acquire(`released-${randomUUID()}`, {
        wait: false,
        signal: new AbortController().signal,
      });
      expect(grant).not.toBeNull();
      if (grant !== null) expect(await session.release(grant)).toBe(true);
      expect(await answeredBeforeHeartbeat(session)).toBeLessThanOrEqual(1);
      await session.keepAlive();
      expect(session.lost?.aborted).toBe(false);
    });

    it("closing a session with thousands of statements queued ends each of them", async () => {
      const session = await open();
      const reads = Array.from({ length: 20_000 }, (_, i) => session.holder(`read-${i}`));
      await session.close();
      const settled = await Promise.allSettled(reads);
      const failed = settled.filter((s) => s.status === "rejected");
      expect(failed.length).toBeGreaterThan(0);
      for (const s of failed) expect((s.reason as Error).name).toBe("SessionLostError");
    });
  });
});
