import { randomUUID } from "node:crypto";
import { expectLooksSoonAfterChange } from "@baton/conformance";
import { describeBackend } from "@baton/conformance/harness";
import mysql from "mysql2/promise";
import { afterEach, describe, it } from "vitest";
import { MysqlBackend } from "../src/index.js";

describeBackend("mysql-lease", (url) => {
  describe("mysql row-lease waits", () => {
    const closers: (() => Promise<unknown>)[] = [];
    afterEach(async () => {
      for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
    });

    it("a waiter that sees the name change hands looks again soon, and looks less often while one grant lasts", async () => {
      // Tables of their own: no other test takes tokens from their counter meanwhile.
      const tablePrefix = `looks_${randomUUID().slice(0, 8)}_`;
      const backend = new MysqlBackend({ url, tablePrefix });
      closers.push(async () => {
        await backend.close();
        const admin = await mysql.createConnection(
          url.replace(/^mariadb:/, "mysql:").replace(/[?&]mode=row-lease/, ""),
        );
        const [tables] = await admin.query("SHOW TABLES LIKE ?", [`${tablePrefix}%`]);
        for (const row of tables as Record<string, string>[]) {
          await admin.query(`DROP TABLE \`${Object.values(row)[0]}\``);
        }
        await admin.end();
      });
      await expectLooksSoonAfterChange(backend);
    });
  });
});
