import { describeBackend } from "@baton/conformance/harness";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresBackend } from "../src/index.js";

describeBackend("postgres", (url) => {
  describe("postgres session connection", () => {
    let backend: PostgresBackend;
    beforeAll(() => {
      backend = new PostgresBackend({ url });
    });
    afterAll(async () => {
      await backend?.close();
    });

    it("overlapping acquires, renewals and releases run one at a time, without pg's deprecation warning", async () => {
      const warnings: string[] = [];
      const onWarning = (w: Error) => warnings.push(w.message);
      process.on("warning", onWarning);
      const session = await backend.openSession({ ttlMs: 5_000, ownerId: "overlap" });
      try {
        const signal = new AbortController().signal;
        const names = Array.from({ length: 20 }, (_, i) => `overlap-${i}`);
        const [grants] = await Promise.all([
          Promise.all(names.map((n) => session.acquire(n, { wait: false, signal }))),
          session.keepAlive(),
          session.keepAlive(),
        ]);
        expect(grants.every((g) => g !== null)).toBe(true);
        const tokens = grants.map((g) => g?.token ?? 0n);
        expect(new Set(tokens).size).toBe(names.length);
        const [released] = await Promise.all([
          Promise.all(grants.map((g) => (g === null ? false : session.release(g)))),
          session.keepAlive(),
        ]);
        expect(released).toEqual(names.map(() => true));
        await new Promise((r) => setImmediate(r));
        expect(warnings.filter((m) => m.includes("already executing"))).toEqual([]);
      } finally {
        process.off("warning", onWarning);
        await session.close();
      }
    });
  });
});
