import pg from "pg";
import type { Statement } from "./statements.js";

/** Called once with a call's outcome: the first column of its first row, as the server's text. */
export type ColumnCallback = (error: Error | null, column: string | null) => void;

/** pg's connection, with its record of the named statements it has prepared (or sent to be). */
interface PgConnection extends pg.Connection {
  readonly parsedStatements: Record<string, string | undefined>;
  readonly submittedNamedStatements: Record<string, string | undefined>;
  sendCopyFail(message: string): void;
}

/**
 * One run of a prepared statement whose answer is one column of one row (an acquire's token, a
 * release's `unlocked`), through pg's `Submittable` interface (`client.query(call)`): pg queues
 * it, reads the server's messages and hands them over, as for its own queries. The call
 * writes Bind, Execute and Sync itself (Parse too, the first time on a connection, recorded
 * where pg records its own named statements), and keeps the first column of the first row as
 * the server sent it, as text. It builds none of what pg's `Query` does for every statement (a
 * copy of the config, a `Result`, its field list and row objects), and sends no Describe, so
 * the server sends no row description. Being the server's text, the column is never changed by
 * a type parser set for the process (`pg.types.setTypeParser`).
 */
export class PreparedCall implements pg.Submittable {
  /** Read by pg: it records a statement of this name as prepared once the server parsed it. */
  readonly name: string;
  /** Read by pg, with {@link name}. */
  readonly text: string;
  readonly #values: readonly (string | null)[];
  /** Called once with the outcome; pg may wrap it (`query_timeout`). */
  callback: ColumnCallback;
  #column: string | null = null;
  #row = false;
  #done = false;

  constructor(statement: Statement, values: readonly (string | null)[], callback: ColumnCallback) {
    this.name = statement.name;
    this.text = statement.text;
    this.#values = values;
    this.callback = callback;
  }

  /** Called by pg when the call's turn on the connection comes. */
  submit(connection: pg.Connection): void {
    const c = connection as PgConnection;
    const { stream } = c;
    if (
      c.parsedStatements[this.name] !== undefined ||
      c.submittedNamedStatements[this.name] !== undefined
    ) {
      // Hot path: see docs/hot-path.md, "PostgreSQL".
      if (stream.writable) stream.write(bindExecuteSync(this.name, this.#values));
      return;
    }
    // The first run on this connection: Parse too, through pg's own encoder, in one write.
    stream.cork();
    try {
      c.parse({ name: this.name, text: this.text, types: [] }, true);
      c.submittedNamedStatements[this.name] = this.text;
      c.bind({ statement: this.name, values: this.#values as (string | null)[] }, true);
      c.execute(null, true);
      c.sync();
    } finally {
      stream.uncork();
    }
  }

  handleRowDescription(): void {}

  handleDataRow(message: { readonly fields: readonly (string | null)[] }): void {
    if (this.#row) return;
    this.#row = true;
    this.#column = message.fields[0] ?? null;
  }

  handleCommandComplete(): void {}

  handleEmptyQuery(): void {}

  handlePortalSuspended(): void {}

  handleCopyInResponse(connection: pg.Connection): void {
    (connection as PgConnection).sendCopyFail("Baton's statements copy nothing");
  }

  handleCopyData(): void {}

  handleError(error: Error): void {
    this.#finish(error, null);
  }

  handleReadyForQuery(): void {
    this.#finish(null, this.#column);
  }

  #finish(error: Error | null, column: string | null): void {
    if (this.#done) return;
    this.#done = true;
    this.callback(error, column);
  }
}

// pg's pipeline mode sends only its own `Query` objects: it refuses the submittables that keep a
// portal open across round trips (cursors, streams). A call ends at its own Sync as a `Query`
// does, so it goes in the same pipeline: it is a `Query` to pg's check, with every method pg
// calls on it its own.
Object.setPrototypeOf(PreparedCall.prototype, pg.Query.prototype);

/** Execute (the unnamed portal, every row) and Sync, as PostgreSQL's protocol spells them. */
const EXECUTE_SYNC = Buffer.from([0x45, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0x53, 0, 0, 0, 4]);

/**
 * Bind (the unnamed portal, prepared statement `name`, `values` as text, the result as text),
 * Execute and Sync in one buffer: the bytes pg writes for a run of a statement the connection
 * has prepared, which it sends as three writes.
 */
export function bindExecuteSync(name: string, values: readonly (string | null)[]): Buffer {
  const count = values.length;
  // Length, portal "", name, the parameters' format codes (text), their count, one result
  // format code (text).
  let bindLength = 4 + 1 + Buffer.byteLength(name) + 1 + 2 + 2 * count + 2 + 2 + 2;
  for (const value of values) bindLength += 4 + (value === null ? 0 : Buffer.byteLength(value));
  const buffer = Buffer.allocUnsafe(1 + bindLength + EXECUTE_SYNC.length);
  buffer[0] = 0x42;
  let at = buffer.writeInt32BE(bindLength, 1);
  buffer[at++] = 0;
  at += buffer.write(name, at, "utf8");
  buffer[at++] = 0;
  at = buffer.writeInt16BE(count, at);
  buffer.fill(0, at, at + 2 * count);
  at += 2 * count;
  at = buffer.writeInt16BE(count, at);
  for (const value of values) {
    if (value === null) {
      at = buffer.writeInt32BE(-1, at);
      continue;
    }
    const at0 = at + 4;
    const length = buffer.write(value, at0, "utf8");
    buffer.writeInt32BE(length, at);
    at = at0 + length;
  }
  at = buffer.writeInt16BE(1, at);
  at = buffer.writeInt16BE(0, at);
  EXECUTE_SYNC.copy(buffer, at);
  return buffer;
}

/**
 * Runs `statement` with `values` on `client` as a {@link PreparedCall} (pg sends it once what
 * it runs has finished): the first column of the first row, `null` without a row or for NULL.
 * Rejects with pg's error.
 */
export function callPrepared(
  client: pg.Client,
  statement: Statement,
  values: readonly (string | null)[],
): Promise<string | null> {
  return new Promise((resolve, reject) => {
    client.query(
      new PreparedCall(statement, values, (error, column) => {
        if (error === null) resolve(column);
        else reject(error);
      }),
    );
  });
}
