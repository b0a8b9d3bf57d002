import type { BackendSession, OpenSessionOptions } from "@baton/core";
import { describeTarget } from "./mysql-errors.js";
import { getLockName, TOKEN_ROW, tableNames } from "./mysql-keys.js";
import { recordStatements } from "./mysql-lease-statements.js";
import type { ResolvedMysqlOptions } from "./mysql-options.js";
import { MysqlSession, type MysqlSessionContext } from "./mysql-session.js";
import { namedLockStatements } from "./named-lock-statements.js";
import { NamedLockWaiters } from "./named-lock-waiters.js";
import { SERVER_MICROS } from "./schema.js";

/**
 * The named-lock mode of one backend: the context its sessions share (statements, waiter
 * connections) and the sessions it opened. When the last of them closes, the waiter
 * connections end too (they are made again by the next wait), so a backend whose sessions are
 * all closed keeps no connection of this mode open.
 */
class NamedLockMode {
  readonly #context: MysqlSessionContext;
  readonly #waiters: NamedLockWaiters;
  readonly #sessions = new Set<BackendSession>();

  constructor(options: ResolvedMysqlOptions) {
    const names = tableNames(options.tablePrefix);
    const statements = namedLockStatements({
      tokens: names.tokens,
      tokenRow: TOKEN_ROW,
      holders: names.holders,
    });
    this.#waiters = new NamedLockWaiters(options.connection, statements.waitUntilFree);
    this.#context = {
      settings: options.connection,
      where: describeTarget(options.connection),
      statements,
      recordStatements: recordStatements(names, SERVER_MICROS),
      namespace: options.namespace,
      lockKey: (name) => getLockName(options.namespace, name),
      waiters: this.#waiters,
    };
  }

  async open(
    options: OpenSessionOptions,
    onClose: (session: BackendSession) => void,
  ): Promise<BackendSession> {
    const session = await MysqlSession.open(
      this.#context,
      options.ownerId,
      options.ttlMs,
      options.signal,
      (closed) => {
        onClose(closed);
        this.#sessions.delete(closed);
        if (this.#sessions.size === 0) void this.#waiters.endIdle();
      },
    );
    this.#sessions.add(session);
    return session;
  }
}

/** The named-lock mode of each backend, by its resolved options (one object per backend). */
const modes = new WeakMap<ResolvedMysqlOptions, NamedLockMode>();

/**
 * Opens a session of the named-lock mode for the backend whose checked options are `options`
 * (see MysqlSession); `onClose` is called when it closes.
 */
export function openNamedLockSession(
  options: ResolvedMysqlOptions,
  open: OpenSessionOptions,
  onClose: (session: BackendSession) => void,
): Promise<BackendSession> {
  let mode = modes.get(options);
  if (mode === undefined) {
    mode = new NamedLockMode(options);
    modes.set(options, mode);
  }
  return mode.open(open, onClose);
}
