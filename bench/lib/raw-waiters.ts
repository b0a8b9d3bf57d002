/**
 * The raw hand-off between processes, for the many-waiters section (waiters.ts): each waiter
 * is one connection of the raw client blocked in the store's own wait, so the store hands the
 * lock to the next waiter with no client work between the release and the grant. This is the
 * least a hand-off can cost on the store and host it runs on, shown beside the coordinator's.
 *
 * - redis: the lock is a list holding one element; acquire is `BLPOP` (Redis serves blocked
 *   clients first come, first served), release `RPUSH`. No lease, no token.
 * - postgres: blocking `pg_advisory_lock`, then `pg_advisory_unlock`.
 * - mysql: blocking `GET_LOCK`, then `RELEASE_LOCK`.
 */
import { Redis } from "ioredis";
import mysql from "mysql2/promise";
import pg from "pg";

/** The stores with a raw blocking hand-off here. */
export type RawKind = "redis" | "postgres" | "mysql";

/** One raw waiter: its own connection. */
export interface RawWaiter {
  /** Waits up to about a second at most: true when it holds the lock. */
  acquire(): Promise<boolean>;
  release(): Promise<void>;
  /**
   * Makes the lock free, once per lock before any waiter starts, where a lock does not start
   * free (Redis: its list gets its one element).
   */
  makeFree?(): Promise<void>;
  close(): Promise<void>;
}

/** What the waiter's blocking call waits at most, so a run that ends is not held up. */
const WAIT_S = 0.5;

/** A raw waiter for lock `name` on the store at `url` (the harness's URL). */
export async function rawWaiter(kind: RawKind, url: string, name: string): Promise<RawWaiter> {
  switch (kind) {
    case "redis": {
      const c = new Redis(url);
      await c.ping();
      return {
        acquire: async () => (await c.blpop(name, WAIT_S)) !== null,
        release: async () => {
          await c.rpush(name, "1");
        },
        makeFree: async () => {
          await c.multi().del(name).rpush(name, "1").exec();
        },
        close: async () => {
          await c.quit().catch(() => undefined);
        },
      };
    }
    case "postgres": {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      await c.query(`SET lock_timeout = '${WAIT_S * 1000}ms'`);
      const key = `hashtextextended('${name.replace(/'/g, "''")}', 0)`;
      return {
        acquire: async () => {
          try {
            await c.query(`SELECT pg_advisory_lock(${key})`);
            return true;
          } catch (error) {
            // 55P03: lock_timeout ran out.
            if ((error as { code?: string }).code === "55P03") return false;
            throw error;
          }
        },
        release: async () => {
          await c.query(`SELECT pg_advisory_unlock(${key})`);
        },
        close: async () => {
          await c.end().catch(() => undefined);
        },
      };
    }
    case "mysql": {
      const c = await mysql.createConnection(url);
      return {
        acquire: async () => {
          // Whole seconds: MySQL's GET_LOCK may not take a fraction (MariaDB does since 10.1.2).
          const [rows] = await c.query("SELECT GET_LOCK(?, 1) AS got", [name]);
          return (rows as { got: number }[])[0]?.got === 1;
        },
        release: async () => {
          await c.query("SELECT RELEASE_LOCK(?)", [name]);
        },
        close: async () => {
          await c.end().catch(() => undefined);
        },
      };
    }
  }
}
