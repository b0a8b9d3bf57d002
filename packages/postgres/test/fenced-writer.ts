/**
 * A lock holder in a child process that writes two bills in one fenced transaction, saying
 * "in-transaction" between them (the test freezes it there). Prints one JSON line per event;
 * ends on its own once the transaction settled, closing what it opened.
 *
 * Environment: BATON_URL, BATON_TTL_MS, BATON_NAME, BATON_BILLS (the bills table).
 */
import { createCoordinator } from "@baton/core";
import pg from "pg";
import { pgFence } from "../src/index.js";

const url = process.env.BATON_URL as string;
const ttlMs = Number(process.env.BATON_TTL_MS);
const name = process.env.BATON_NAME as string;
const bills = process.env.BATON_BILLS as string;
const say = (event: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(event)}\n`);

const pool = new pg.Pool({ connectionString: url, max: 2 });
pool.on("error", () => undefined);
const fence = pgFence(pool, { timeoutMs: ttlMs });
const coordinator = createCoordinator({ url, ttlMs, mode: "correctness", fence });
try {
  const lock = await coordinator.acquire(name, { waitMs: 10_000 });
  const token = lock.token.toString();
  try {
    await fence.transaction(name, lock.token, async (client) => {
      await client.query(`INSERT INTO ${bills} (client_id, token) VALUES (1, $1)`, [token]);
      say({ event: "in-transaction", token });
      await new Promise((resolve) => setTimeout(resolve, 500)); // frozen here
      await client.query(`INSERT INTO ${bills} (client_id, token) VALUES (2, $1)`, [token]);
    });
    say({ event: "committed", token });
  } catch (error) {
    say({ event: "rejected", name: (error as Error).name, message: (error as Error).message });
  }
} finally {
  await coordinator.close();
  await pool.end();
}
