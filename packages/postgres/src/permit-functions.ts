import { createHash } from "node:crypto";
import { permitChannel, type SchemaNames } from "./postgres-keys.js";

/*
 * Permits (semaphores and read-write locks) in PostgreSQL, for the advisory mode.
 *
 * - Every holder or waiter of a permit key is one row of `permits` (unlogged: its session is
 *   a connection, which a crash of the server ends too): its id from the token sequence, taken
 *   while the key's queue row is locked, so ids order each key's queue; its session's
 *   liveness key; its permits, mode, token (once granted) and value.
 * - Each permit key has a row in `permit_queues` (unlogged, never deleted): its limit, the
 *   permits its entries hold (`held`) and hold or ask for (`queued`) in all, and `boundary`,
 *   the id of the newest grant: every waiting entry's id is greater. Every change of a key
 *   locks this row first (`FOR UPDATE`), so a key's changes are serialised, and runs in a
 *   function: its statements each take a new snapshot, and see what the row's last holder
 *   wrote (a single statement would read the entries as they were before it waited for the
 *   row).
 * - `permit_tokens` (logged) keeps each key's newest write token for as long as the token
 *   sequence keeps its order: a read carries it, also after the key had no holders.
 * - An entry lives while its session does: a session holds a session-level advisory lock on
 *   its liveness key (a random bigint) from its first permit on, and the server drops it when
 *   the connection ends (closed, killed, or ended by `idle_session_timeout` after a process
 *   froze). Another connection sees a dead session when `pg_try_advisory_xact_lock_shared` of
 *   its key succeeds (and lets go of it at the end of its transaction). The entries of dead
 *   sessions are deleted by the next change of their key that needs the permits (`clean`), so
 *   the session's one renewal keeps every permit it holds, however many.
 * - Admission: an entry is granted when the permits of every entry ahead of it plus its own
 *   are at most the limit. Every change then grants the waiting entries that now fit, in queue
 *   order (`promote`), so the granted entries are always the head of the queue, grant order
 *   is id order, and a request at the tail is granted at once exactly when `queued` plus its
 *   permits fit. `promote` announces the ids it granted (`NOTIFY`, delivered at commit) to the
 *   sessions listening, whose waiters read their grant then.
 * - Tokens: a "permit" or "write" grant takes `nextval` of the token sequence as it is
 *   granted (a write also stores it in `permit_tokens`); a "read" grant carries the newest
 *   write's token (0 when there was none).
 */

/** The names of the permit functions of one schema (each ends in a digest of its text). */
export interface PermitFunctionNames {
  /** See {@link PermitFunctions.acquire}. */
  readonly acquire: string;
  /** See {@link PermitFunctions.check}. */
  readonly check: string;
  /** See {@link PermitFunctions.release}. */
  readonly release: string;
  /** See {@link PermitFunctions.releaseMany}. */
  readonly releaseMany: string;
  /** See {@link PermitFunctions.downgrade}. */
  readonly downgrade: string;
  /** Every function's name, the two inner ones too (for the schema check). */
  readonly all: readonly string[];
}

/** The permit functions of one schema: their names and the DDL that creates them. */
export interface PermitFunctions {
  /** The functions' names (their signatures: see Statements in statements.ts). */
  readonly names: PermitFunctionNames;
  /** Statements that create the tables and functions when missing (run in one transaction). */
  readonly ddl: readonly string[];
}

/** A function's schema-qualified name: `label` and a digest of its body. */
function functionName(names: SchemaNames, label: string, body: string): string {
  const digest = createHash("sha256").update(body).digest("hex").slice(0, 12);
  return `${names.schema}."${label}_${digest}"`;
}

/**
 * The permit tables and functions for the schema objects `names`. Grants are announced on
 * the schema's {@link permitChannel}.
 */
export function permitFunctions(names: SchemaNames): PermitFunctions {
  const channel = permitChannel(names.schema);
  const { permits, permitQueues: queues, permitTokens: tokens } = names;
  const sequence = names.tokens.replaceAll("'", "''");
  /** Matches the entries of the key of queue row `q`, in table alias `e`. */
  const ofKey = "e.namespace = q.namespace AND e.name = q.name";
  /** Locks the queue row of key (`p_namespace`, `p_name`) into `q`. */
  const lockQueue = `SELECT * INTO q FROM ${queues} k
    WHERE k.namespace = p_namespace AND k.name = p_name FOR UPDATE`;
  /** Writes `q` back to its row. */
  const storeQueue = `UPDATE ${queues} k SET permits = q.permits, held = q.held, queued = q.queued,
      boundary = q.boundary
    WHERE k.namespace = q.namespace AND k.name = q.name`;
  /** Sets `v_token` to the newest write token of the key of `q` (0 when none). */
  const readWriteToken = `SELECT t.token INTO v_token FROM ${tokens} t
      WHERE t.namespace = q.namespace AND t.name = q.name;
    v_token := coalesce(v_token, 0)`;
  /** Stores `v_token` as the newest write token of the key of `q`. */
  const storeWriteToken = `INSERT INTO ${tokens} AS t (namespace, name, token)
      VALUES (q.namespace, q.name, v_token)
      ON CONFLICT (namespace, name) DO UPDATE SET token = greatest(t.token, EXCLUDED.token)`;

  // Deletes the entries of the key of `q` whose session is dead (not `p_session`, this
  // connection's, which lives): one index probe per session of the key (a skip scan), one
  // try of its liveness key each.
  const cleanBody = `(q ${queues}, p_session bigint) RETURNS ${queues}
LANGUAGE plpgsql AS $baton$
DECLARE
  v_session bigint;
  v_queued bigint;
  v_held bigint;
BEGIN
  SELECT min(e.session) INTO v_session FROM ${permits} e WHERE ${ofKey};
  WHILE v_session IS NOT NULL LOOP
    IF v_session <> p_session AND pg_try_advisory_xact_lock_shared(v_session) THEN
      WITH d AS (DELETE FROM ${permits} e WHERE ${ofKey} AND e.session = v_session
        RETURNING e.permits, e.granted)
      SELECT coalesce(sum(d.permits), 0), coalesce(sum(d.permits) FILTER (WHERE d.granted), 0)
        INTO v_queued, v_held FROM d;
      q.queued := q.queued - v_queued;
      q.held := q.held - v_held;
    END IF;
    SELECT min(e.session) INTO v_session FROM ${permits} e WHERE ${ofKey} AND e.session > v_session;
  END LOOP;
  RETURN q;
END $baton$`;
  const clean = functionName(names, "permit_clean", cleanBody);

  // Grants the waiting entries of the key of `q` that fit, in queue order, and announces
  // their ids (the first and the last) on the channel.
  const promoteBody = `(q ${queues}) RETURNS ${queues}
LANGUAGE plpgsql AS $baton$
DECLARE
  e record;
  v_write bigint;
  v_token bigint;
  v_first bigint;
  v_last bigint;
BEGIN
  IF q.queued <= q.held THEN RETURN q; END IF;
  FOR e IN SELECT p.id, p.permits, p.mode FROM ${permits} p
      WHERE p.namespace = q.namespace AND p.name = q.name AND p.id > q.boundary
      ORDER BY p.id LOOP
    EXIT WHEN q.held + e.permits > q.permits;
    IF e.mode = 'read' THEN
      IF v_write IS NULL THEN
        ${readWriteToken};
        v_write := v_token;
      END IF;
      v_token := v_write;
    ELSE
      v_token := nextval('${sequence}');
      IF e.mode = 'write' THEN
        ${storeWriteToken};
        v_write := v_token;
      END IF;
    END IF;
    UPDATE ${permits} p SET granted = true, token = v_token
      WHERE p.namespace = q.namespace AND p.name = q.name AND p.id = e.id;
    q.held := q.held + e.permits;
    q.boundary := e.id;
    v_first := coalesce(v_first, e.id);
    v_last := e.id;
  END LOOP;
  IF v_last IS NOT NULL THEN
    PERFORM pg_notify('${channel}', v_first || ' ' || v_last);
  END IF;
  RETURN q;
END $baton$`;
  const promote = functionName(names, "permit_promote", promoteBody);

  const acquireBody = `(p_namespace text, p_name text, p_limit integer, p_permits integer,
  p_mode text, p_session bigint, p_owner text, p_value text, p_wait boolean, p_live boolean)
RETURNS text LANGUAGE plpgsql AS $baton$
DECLARE
  q ${queues};
  v_id bigint;
  v_token bigint;
  v_changed boolean := false;
BEGIN
  IF p_live AND NOT pg_try_advisory_lock(p_session) THEN RETURN 's'; END IF;
  ${lockQueue};
  IF NOT FOUND THEN
    INSERT INTO ${queues} (namespace, name, permits) VALUES (p_namespace, p_name, p_limit)
      ON CONFLICT DO NOTHING;
    ${lockQueue};
  END IF;
  IF q.queued > 0 AND (q.permits <> p_limit OR q.queued + p_permits > q.permits) THEN
    -- Not granted at once as things stand: first drop what dead sessions left.
    q := ${promote}(${clean}(q, p_session));
    v_changed := true;
  END IF;
  IF q.permits <> p_limit THEN
    IF q.queued > 0 THEN
      IF v_changed THEN ${storeQueue}; END IF;
      RETURN 'l' || q.permits;
    END IF;
    q.permits := p_limit;
    v_changed := true;
  END IF;
  IF q.queued + p_permits <= q.permits THEN
    v_id := nextval('${sequence}');
    IF p_mode = 'read' THEN
      ${readWriteToken};
    ELSE
      v_token := v_id;
      IF p_mode = 'write' THEN ${storeWriteToken}; END IF;
    END IF;
    INSERT INTO ${permits} (id, namespace, name, session, owner, permits, mode, granted, token, value)
      VALUES (v_id, p_namespace, p_name, p_session, p_owner, p_permits, p_mode, true, v_token, p_value);
    q.held := q.held + p_permits;
    q.queued := q.queued + p_permits;
    q.boundary := v_id;
    ${storeQueue};
    RETURN 'g' || v_id || ' ' || v_token;
  END IF;
  IF NOT p_wait THEN
    IF v_changed THEN ${storeQueue}; END IF;
    RETURN 'n';
  END IF;
  v_id := nextval('${sequence}');
  INSERT INTO ${permits} (id, namespace, name, session, owner, permits, mode, granted, token, value)
    VALUES (v_id, p_namespace, p_name, p_session, p_owner, p_permits, p_mode, false, NULL, p_value);
  q.queued := q.queued + p_permits;
  ${storeQueue};
  RETURN 'w' || v_id;
END $baton$`;
  const acquire = functionName(names, "permit_acquire", acquireBody);

  // A waiter's look at its entry: `g<token>` granted, `w` still waiting, `x` gone. With
  // `p_clean` (a poll, not a wake), it first drops what dead sessions left on the key.
  const checkBody = `(p_namespace text, p_name text, p_id bigint, p_session bigint,
  p_clean boolean) RETURNS text LANGUAGE plpgsql AS $baton$
DECLARE
  q ${queues};
  v_granted boolean;
  v_token bigint;
BEGIN
  SELECT e.granted, e.token INTO v_granted, v_token FROM ${permits} e
    WHERE e.namespace = p_namespace AND e.name = p_name AND e.id = p_id AND e.session = p_session;
  IF NOT FOUND THEN RETURN 'x'; END IF;
  IF v_granted THEN RETURN 'g' || v_token; END IF;
  IF NOT p_clean THEN RETURN 'w'; END IF;
  ${lockQueue};
  IF NOT FOUND THEN RETURN 'x'; END IF;
  q := ${promote}(${clean}(q, p_session));
  ${storeQueue};
  SELECT e.granted, e.token INTO v_granted, v_token FROM ${permits} e
    WHERE e.namespace = p_namespace AND e.name = p_name AND e.id = p_id AND e.session = p_session;
  IF NOT FOUND THEN RETURN 'x'; END IF;
  IF v_granted THEN RETURN 'g' || v_token; END IF;
  RETURN 'w';
END $baton$`;
  const check = functionName(names, "permit_check", checkBody);

  // Deletes entry `p_id` of session `p_session`; returns whether it was there and granted.
  // When others wait and none of them could be granted, it first drops what dead sessions left.
  const releaseBody = `(p_namespace text, p_name text, p_id bigint, p_session bigint)
RETURNS boolean LANGUAGE plpgsql AS $baton$
DECLARE
  q ${queues};
  v_permits integer;
  v_granted boolean;
  v_boundary bigint;
BEGIN
  ${lockQueue};
  IF NOT FOUND THEN RETURN false; END IF;
  DELETE FROM ${permits} e
    WHERE e.namespace = p_namespace AND e.name = p_name AND e.id = p_id AND e.session = p_session
    RETURNING e.permits, e.granted INTO v_permits, v_granted;
  IF NOT FOUND THEN RETURN false; END IF;
  q.queued := q.queued - v_permits;
  IF v_granted THEN q.held := q.held - v_permits; END IF;
  v_boundary := q.boundary;
  q := ${promote}(q);
  IF q.queued > q.held AND q.boundary = v_boundary THEN
    q := ${promote}(${clean}(q, p_session));
  END IF;
  ${storeQueue};
  RETURN v_granted;
END $baton$`;
  const release = functionName(names, "permit_release", releaseBody);

  // Deletes the entries `p_ids` (of keys `p_namespaces`, `p_names`, element by element) of
  // session `p_session`, key by key in order (no deadlock with another such call); returns
  // how many it deleted. A session's close, and the releases that failed while it lived.
  const releaseManyBody = `(p_namespaces text[], p_names text[], p_ids bigint[],
  p_session bigint) RETURNS integer LANGUAGE plpgsql AS $baton$
DECLARE
  q ${queues};
  r record;
  v_queued bigint;
  v_held bigint;
  v_count integer;
  v_total integer := 0;
BEGIN
  FOR r IN SELECT u.namespace, u.name, array_agg(u.id) AS ids
      FROM unnest(p_namespaces, p_names, p_ids) AS u(namespace, name, id)
      GROUP BY u.namespace, u.name ORDER BY u.namespace, u.name LOOP
    SELECT * INTO q FROM ${queues} x
      WHERE x.namespace = r.namespace AND x.name = r.name FOR UPDATE;
    CONTINUE WHEN NOT FOUND;
    WITH d AS (DELETE FROM ${permits} e
      WHERE ${ofKey} AND e.session = p_session AND e.id = ANY(r.ids)
      RETURNING e.permits, e.granted)
    SELECT coalesce(sum(d.permits), 0), coalesce(sum(d.permits) FILTER (WHERE d.granted), 0),
        count(*)
      INTO v_queued, v_held, v_count FROM d;
    q.queued := q.queued - v_queued;
    q.held := q.held - v_held;
    v_total := v_total + v_count;
    q := ${promote}(q);
    ${storeQueue};
  END LOOP;
  RETURN v_total;
END $baton$`;
  const releaseMany = functionName(names, "permit_release_many", releaseManyBody);

  // Turns write grant `p_id` of session `p_session` into a read grant of 1 permit with the
  // same token, and grants the entries behind it that now fit: its token, or NULL when it was
  // no write grant of that session.
  const downgradeBody = `(p_namespace text, p_name text, p_id bigint, p_session bigint)
RETURNS text LANGUAGE plpgsql AS $baton$
DECLARE
  q ${queues};
  v_permits integer;
  v_token bigint;
BEGIN
  ${lockQueue};
  IF NOT FOUND THEN RETURN NULL; END IF;
  UPDATE ${permits} e SET mode = 'read', permits = 1
    FROM (SELECT f.id, f.permits FROM ${permits} f
      WHERE f.namespace = p_namespace AND f.name = p_name AND f.id = p_id
        AND f.session = p_session AND f.granted AND f.mode = 'write') w
    WHERE e.namespace = p_namespace AND e.name = p_name AND e.id = w.id
    RETURNING w.permits, e.token INTO v_permits, v_token;
  IF NOT FOUND THEN RETURN NULL; END IF;
  q.held := q.held - (v_permits - 1);
  q.queued := q.queued - (v_permits - 1);
  q := ${promote}(q);
  ${storeQueue};
  RETURN v_token::text;
END $baton$`;
  const downgrade = functionName(names, "permit_downgrade", downgradeBody);

  const tables = [
    `CREATE UNLOGGED TABLE IF NOT EXISTS ${queues} (
      namespace text COLLATE "C" NOT NULL,
      name text COLLATE "C" NOT NULL,
      permits integer NOT NULL,
      held bigint NOT NULL DEFAULT 0,
      queued bigint NOT NULL DEFAULT 0,
      boundary bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (namespace, name)
    )`,
    `CREATE UNLOGGED TABLE IF NOT EXISTS ${permits} (
      namespace text COLLATE "C" NOT NULL,
      name text COLLATE "C" NOT NULL,
      id bigint NOT NULL,
      session bigint NOT NULL,
      owner text NOT NULL,
      permits integer NOT NULL,
      mode text NOT NULL,
      granted boolean NOT NULL,
      token bigint,
      value text,
      PRIMARY KEY (namespace, name, id),
      -- Its index finds the sessions of a key (one probe each: see clean), declared inline
      -- like the leases' (a CREATE INDEX of its own would need the table's owner later).
      UNIQUE (namespace, name, session, id)
    )`,
    `CREATE TABLE IF NOT EXISTS ${tokens} (
      namespace text COLLATE "C" NOT NULL,
      name text COLLATE "C" NOT NULL,
      token bigint NOT NULL,
      PRIMARY KEY (namespace, name)
    )`,
  ];
  // Created only when missing: a function's name carries a digest of its text, so a changed
  // function is a new one, and an existing one (perhaps another role's) is left alone.
  const fn = (name: string, body: string) => `DO $create$ BEGIN
  IF to_regproc('${name.replaceAll("'", "''")}') IS NULL THEN
    CREATE FUNCTION ${name}${body};
  END IF;
END $create$`;
  return {
    names: {
      acquire,
      check,
      release,
      releaseMany,
      downgrade,
      all: [clean, promote, acquire, check, release, releaseMany, downgrade],
    },
    ddl: [
      ...tables,
      fn(clean, cleanBody),
      fn(promote, promoteBody),
      fn(acquire, acquireBody),
      fn(check, checkBody),
      fn(release, releaseBody),
      fn(releaseMany, releaseManyBody),
      fn(downgrade, downgradeBody),
    ],
  };
}
