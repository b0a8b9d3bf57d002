import { describeBackend } from "@baton/conformance/harness";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callPrepared } from "../src/prepared-call.js";

describeBackend("postgres", (url) => {
  describe("postgres prepared call", () => {
    const client = new pg.Client({ connectionString: url });
    client.on("error", () => undefined);
    beforeAll(async () => {
      await client.connect();
    });
    afterAll(async () => {
      await client.end();
    });

    const echo = {
      name: "test_prepared_call_echo",
      text: "SELECT format('%s|%s|%s', $1::text, coalesce($2::text, 'NULL'), length($3::text))",
    };

    it("sends its values as text and answers the first column as the server's text, run after run", async () => {
      // The first run prepares the statement; the later ones only bind and execute it.
      for (let i = 0; i < 3; i++) {
        expect(await callPrepared(client, echo, ["zürich ✓", null, ""])).toBe("zürich ✓|NULL|0");
        expect(await callPrepared(client, echo, [String(-(2n ** 63n)), "", "ab"])).toBe(
          "-9223372036854775808||2",
        );
      }
    });

    it("answers null for NULL and for no row, and the first row of several", async () => {
      const rows = {
        name: "test_prepared_call_rows",
        text: "SELECT v FROM (VALUES ($1::text), ('second')) t(v) WHERE $2::int > 0",
      };
      for (let i = 0; i < 2; i++) {
        expect(await callPrepared(client, rows, [null, "1"])).toBeNull();
        expect(await callPrepared(client, rows, ["first", "0"])).toBeNull();
        expect(await callPrepared(client, rows, ["first", "1"])).toBe("first");
      }
    });

    it("rejects with the server's error, and the connection runs the next statement", async () => {
      const divide = { name: "test_prepared_call_divide", text: "SELECT (1 / $1::int)::text" };
      expect(await callPrepared(client, divide, ["1"])).toBe("1");
      await expect(callPrepared(client, divide, ["0"])).rejects.toMatchObject({ code: "22012" });
      expect(await callPrepared(client, divide, ["1"])).toBe("1");
      expect(await callPrepared(client, echo, ["a", "b", "c"])).toBe("a|b|1");
      // A statement that fails to parse is parsed again next time, not taken as prepared.
      const broken = { name: "test_prepared_call_broken", text: "SELEC 1" };
      for (let i = 0; i < 2; i++) {
        await expect(callPrepared(client, broken, [])).rejects.toMatchObject({ code: "42601" });
      }
      expect((await client.query("SELECT 'still here' AS s")).rows[0].s).toBe("still here");
    });
  });
});
