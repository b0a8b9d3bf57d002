import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import { createCoordinator } from "@baton/core";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresBackend } from "../src/index.js";

describeBackend("postgres", (url) => {
  describe("postgres token sequence", () => {
    const admin = new pg.Client({ connectionString: url });
    admin.on("error", () => undefined);
    const schemas: string[] = [];
    beforeAll(async () => {
      await admin.connect();
    });
    afterAll(async () => {
      for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await admin.end();
    });
    const ownSchema = () => {
      const schema = `baton_seq_${randomUUID().slice(0, 8)}`;
      schemas.push(schema);
      return schema;
    };

    /** Grants of `names` through a backend of `schema`: each lock's token and holder() token. */
    async function grants(schema: string, names: string[], rounds: number) {
      const coordinator = createCoordinator({ backend: new PostgresBackend({ url, schema }) });
      const out: { token: bigint; seen: bigint | undefined }[] = [];
      try {
        for (let i = 0; i < rounds; i++) {
          for (const [n, name] of names.entries()) {
            // Without a value the token lives in a token lock; with one, in a holder row.
            const lock = await coordinator.acquire(name, n % 2 === 0 ? {} : { value: "v" });
            out.push({ token: lock.token, seen: (await coordinator.holder(name))?.token });
            await lock.release();
          }
        }
      } finally {
        await coordinator.close();
      }
      return out;
    }

    it("after DROP SCHEMA ... CASCADE the next grant's token is greater than every earlier one", async () => {
      const schema = ownSchema();
      const names = ["dropped-a", "dropped-b"];
      const before = await grants(schema, names, 3);
      await admin.query(`DROP SCHEMA ${schema} CASCADE`);
      const after = await grants(schema, names, 2);
      for (const g of before) expect(after[0]?.token).toBeGreaterThan(g.token);
      for (const [i, g] of after.entries()) {
        expect(g.seen).toBe(g.token); // holder() reads the same token back
        if (i > 0) expect(g.token).toBeGreaterThan(after[i - 1]?.token ?? 0n);
      }
      for (const g of before) expect(g.seen).toBe(g.token);
    });

    it("an existing sequence keeps counting where it was, and holder() reads its tokens back", async () => {
      const schema = ownSchema();
      await grants(schema, ["existing"], 1);
      // A sequence as an earlier release created it (starting at 1), already at 41.
      await admin.query(
        `DROP SEQUENCE ${schema}.token_seq; CREATE SEQUENCE ${schema}.token_seq AS bigint;
         SELECT setval('${schema}.token_seq', 41)`,
      );
      const got = await grants(schema, ["existing", "existing-valued"], 1);
      expect(got).toEqual([
        { token: 42n, seen: 42n },
        { token: 43n, seen: 43n },
      ]);
    });
  });
});
