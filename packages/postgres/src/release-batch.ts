/** One release of a turn: the key to unlock, and its token lock when its token is kept in one. */
export interface BatchedRelease {
  /** The advisory key, as a decimal string. */
  readonly key: string;
  /** The token lock's token and tag (decimal strings), or `null`: the token is in a holder row. */
  readonly tokenLock: { readonly token: string; readonly tag: string } | null;
}

/** A release waiting for its turn's statement. */
interface Pending extends BatchedRelease {
  readonly resolve: (unlocked: boolean) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Sends the releases {@link ReleaseBatch} collected (one statement for them all) and calls
 * `done` once: with whether each was unlocked, in order, or with the error (`unlocked` null).
 */
export type SendReleases = (
  releases: readonly BatchedRelease[],
  done: (error: unknown, unlocked: readonly boolean[] | null) => void,
) => void;

/**
 * Gathers the releases of one turn of the event loop into one statement.
 *
 * Every statement on a connection pays, at its end, a walk over every advisory lock the
 * connection holds (PostgreSQL releases a transaction's locks by scanning the connection's
 * whole lock table, session locks included): with 20,000 held, about 1 ms each. Releasing
 * them one statement at a time is quadratic: a coordinator closing with 20,000 locks ran past
 * its bound (one TTL), and its renewal queued behind the releases and missed the lease.
 *
 * So a release on an idle connection goes at once, alone (the lone release of an uncontended
 * caller costs what it did), and the others asked for in the same turn (a close, or many
 * callers releasing while the connection is busy) go together as one statement when the turn
 * ends, or sooner: before any other statement of the session is sent ({@link flush}), so that
 * every statement still runs in the order it was asked for.
 */
export class ReleaseBatch {
  readonly #send: SendReleases;
  readonly #idle: () => boolean;
  #pending: Pending[] = [];
  /** The end of this turn is awaited (a release went out at once, or some wait for it). */
  #turnOpen = false;

  /**
   * @param send - sends releases (see {@link SendReleases}).
   * @param idle - whether the connection has nothing sent and unanswered, or waiting to be sent.
   */
  constructor(send: SendReleases, idle: () => boolean) {
    this.#send = send;
    this.#idle = idle;
  }

  /** Whether releases wait to be sent. */
  get pending(): boolean {
    return this.#pending.length > 0;
  }

  /** Unlocks `release.key` (and its token lock) with the turn's other releases: `unlocked`. */
  add(release: BatchedRelease): Promise<boolean> {
    const first = !this.#turnOpen;
    if (first) {
      this.#turnOpen = true;
      // After the promise callbacks of the turn: a release made in a callback joins too.
      process.nextTick(this.#endTurn);
    }
    if (first && this.#idle()) {
      // Hot path: see docs/hot-path.md, "PostgreSQL".
      return new Promise((resolve, reject) => {
        this.#send([release], (error, unlocked) => {
          if (unlocked === null) reject(error);
          else resolve(unlocked[0] === true);
        });
      });
    }
    return new Promise((resolve, reject) => {
      this.#pending.push({ ...release, resolve, reject });
    });
  }

  /** Sends what is pending now (before another statement of the session). */
  flush(): void {
    const batch = this.#pending;
    if (batch.length === 0) return;
    this.#pending = [];
    this.#send(batch, (error, unlocked) => {
      for (const [i, entry] of batch.entries()) {
        if (unlocked === null) entry.reject(error);
        else entry.resolve(unlocked[i] === true);
      }
    });
  }

  readonly #endTurn = (): void => {
    this.#turnOpen = false;
    this.flush();
  };
}

/** The values of the many-release statement: keys, tokens and tags as SQL array literals. */
export function releaseManyValues(releases: readonly BatchedRelease[]): [string, string, string] {
  const keys: string[] = [];
  const tokens: string[] = [];
  const tags: string[] = [];
  for (const r of releases) {
    keys.push(r.key);
    tokens.push(r.tokenLock?.token ?? "NULL");
    tags.push(r.tokenLock?.tag ?? "NULL");
  }
  return [`{${keys.join(",")}}`, `{${tokens.join(",")}}`, `{${tags.join(",")}}`];
}

/** Decodes the many-release statement's column: one `t` or `f` per release, in order. */
export function decodeUnlockedMany(column: string | null, count: number): boolean[] {
  if (column === null || column.length !== count) {
    throw new Error(
      `PostgreSQL answered a release of ${count} locks with ${column === null ? "no row" : `${column.length} results`}`,
    );
  }
  const unlocked: boolean[] = new Array(count);
  for (let i = 0; i < count; i++) unlocked[i] = column.charCodeAt(i) === 116; // "t"
  return unlocked;
}
