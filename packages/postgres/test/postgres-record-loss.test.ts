import { runRecordLoss } from "@baton/conformance";
import { describeBackend } from "@baton/conformance/harness";
import pg from "pg";
import { afterAll } from "vitest";
import { PostgresBackend } from "../src/index.js";

// Both modes keep records in the default schema's records table.
for (const kind of ["postgres", "postgres-lease"] as const) {
  describeBackend(kind, (url) => {
    const admin = new pg.Pool({ connectionString: url, max: 1 });
    afterAll(() => admin.end());
    runRecordLoss({
      name: kind,
      ttlMs: 1_000,
      url,
      createBackend: () => new PostgresBackend({ url }),
      deleteRecord: async (key) => {
        await admin.query("DELETE FROM baton.records WHERE key = $1", [key]);
      },
    });
  });
}
