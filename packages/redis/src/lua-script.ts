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
    return c.evalsha(this.sha, keys.length, keys, args).catch((error: unknown) => {
      if (!(error instanceof Error) || !error.message.startsWith("NOSCRIPT")) throw error;
      return c.eval(this.#source, keys.length, keys, args);
    });
  }
}
