import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import { afterEach, describe, expect, it } from "vitest";
import { MysqlBackend } from "../src/index.js";

/** Reads sent at once, ahead of the renewal, many more than the pool has connections. */
const QUEUED = 300;

describeBackend("mysql-lease", (url) => {
  describe("mysql row-lease renewal", () => {
    const backends: MysqlBackend[] = [];
    afterEach(async () => {
      await Promise.allSettled(backends.splice(0).map((b) => b.close()));
    });

    it("a renewal gets the next pooled connection ahead of the calls waiting for one", async () => {
      const backend = new MysqlBackend({ url });
      backends.push(backend);
      const session = await backend.openSession({
        ownerId: `renewal-${randomUUID()}`,
        ttlMs: 6_000,
      });
      const prefix = `queued-${randomUUID()}`;
      let answered = 0;
      const reads = Array.from({ length: QUEUED }, (_, i) =>
        session.holder(`${prefix}/${i}`).then((holder) => {
          expect(holder).toBeNull();
          answered++;
        }),
      );
      let seen = -1;
      const renewal = session.keepAlive().then(() => {
        seen = answered;
      });
      await Promise.all([...reads, renewal]);
      expect(answered).toBe(QUEUED);
      // At most the calls already running on the pool's connections went first.
      expect(seen).toBeLessThan(QUEUED / 10);
      await session.keepAlive();
      expect(session.lost?.aborted ?? false).toBe(false);
    });
  });
});
