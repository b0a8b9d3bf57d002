import type pg from "pg";

/** How many requests for advisory lock `key` wait in the server (not granted yet). */
export async function queuedRequests(db: pg.Pool, key: bigint): Promise<number> {
  const { rows } = await db.query(
    `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
       AND objsubid = 1 AND classid = (($1::bigint >> 32) & 4294967295)::oid
       AND objid = ($1::bigint & 4294967295)::oid`,
    [key.toString()],
  );
  return rows[0].n as number;
}
