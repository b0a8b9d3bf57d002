import { afterEach } from "vitest";
import { type BatonRun, baton } from "../cli-helpers.js";

/**
 * Starts `baton` processes for the tests of the enclosing block ({@link baton}'s arguments)
 * and SIGKILLs every one still running after each test, waiting until it has ended.
 */
export function useBatonRuns(): (args: string[], env?: Record<string, string>) => BatonRun {
  const runs: BatonRun[] = [];
  afterEach(async () => {
    for (const r of runs.splice(0)) {
      r.child.kill("SIGKILL");
      await r.exited;
    }
  });
  return (args, env) => {
    const r = baton(args, env);
    runs.push(r);
    return r;
  };
}
