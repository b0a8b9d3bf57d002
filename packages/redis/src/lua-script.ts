import { createHash } from "node:crypto";
import type { RedisClient } from "./redis-client.js";

/** EVALSHA and EVAL as ioredis runs them: argument arrays are flattened one level. */
interface ScriptCalls {
  evalsha(sha: string, keys: number, ...args: ReadonlyArray<string | number>[]): Promise<unknown>;
  eval(source: string, keys: number, ...args: ReadonlyArray<string | number>[]): Promise<unknown>;
}

/**
 * A Lua script run with EVALSHA, falling back to EVAL once when the server does not know it
 * yet (a fresh or restarted node), which also loads it for next time.
 */
export class LuaScript {
  /** The script's SHA1, as EVALSHA wants it. */
  readonly sha: string;
  readonly #source: string;

  constructor(source: string) {
    this.#source = source;
    this.sha = createHash("sha1").update(source).digest("hex");
  }

  /**
   * Runs the script on `client` with `keys` and `args`. The arrays are passed as they are:
   * ioredis flattens a command's arguments one level. Hot path: see docs/hot-path.md, "Redis".
   */
  run(
    client: RedisClient,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown> {
    const c = client as unknown as ScriptCalls;
    coalesceWrites(client);
    return c.evalsha(this.sha, keys.length, keys, args).catch((error: unknown) => {
      if (!(error instanceof Error) || !error.message.startsWith("NOSCRIPT")) throw error;
      coalesceWrites(client);
      return c.eval(this.#source, keys.length, keys, args);
    });
  }
}

/** A socket's write buffering (`net.Socket`, `tls.TLSSocket`). */
interface Corkable {
  cork(): void;
  uncork(): void;
}

/** ioredis' commands sent and not yet answered, on one connection. */
interface InFlight {
  readonly commandQueue?: { readonly length: number };
}

/**
 * Commands one socket write carries at most. Every call of a turn in one write makes the
 * server wait for the whole turn and the client for the whole reply batch (caller and store
 * take turns instead of working at once); small batches keep both busy. Hot path: see
 * docs/hot-path.md, "Redis".
 */
const WRITE_BATCH = 4;

/** A socket's commands since its last write in this turn (0: not corked). */
interface CorkState {
  readonly stream: Corkable;
  sent: number;
}

/**
 * Each socket's cork state, made once per socket and reused: a per-turn entry added and
 * removed in a `Map` would rebuild its table every few turns (see docs/hot-path.md, "Core").
 */
const corkStates = new WeakMap<Corkable, CorkState>();

function uncork(state: CorkState): void {
  state.sent = 0;
  state.stream.uncork();
}

/**
 * Coalesces the commands sent on `client`'s connection in this turn of the event loop into
 * writes of up to {@link WRITE_BATCH} commands: its socket is corked at the first command of
 * the turn, written out every {@link WRITE_BATCH} commands, and uncorked once the turn's
 * microtasks ran (`process.nextTick`), so callers acquiring and releasing at once share system
 * calls. A command sent while the connection has no other command in flight goes out at once:
 * a lone caller's request is not held back while the rest of its turn runs, and the commands
 * after it in the turn are corked as usual. An ioredis Cluster (a socket per node) and
 * node-redis (which batches on its own) are left as they are. Hot path: see docs/hot-path.md,
 * "Redis".
 */
function coalesceWrites(client: RedisClient): void {
  const stream = (client as { stream?: Corkable }).stream;
  // Nothing in flight: nothing was corked this turn either (corked commands are in flight).
  if (stream === undefined || (client as InFlight).commandQueue?.length === 0) return;
  let state = corkStates.get(stream);
  if (state === undefined) {
    state = { stream, sent: 0 };
    corkStates.set(stream, state);
  }
  if (state.sent === 0) {
    state.sent = 1;
    stream.cork();
    process.nextTick(uncork, state);
  } else if (state.sent >= WRITE_BATCH) {
    // The batch so far goes out now; the socket stays corked for the rest of the turn.
    stream.uncork();
    stream.cork();
    state.sent = 1;
  } else {
    state.sent++;
  }
}
