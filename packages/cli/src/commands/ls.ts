import { backendFrom, countOption, parse } from "../args.js";
import { openSource } from "../inspect/open-source.js";
import { formatTable, inspectionJson, rowOf } from "../inspect/rows.js";
import { SNAPSHOT_LIMIT, takeSnapshot } from "../inspect/snapshot.js";
import { UsageError } from "../usage-error.js";

export const LS_USAGE = `usage: baton ls [PREFIX] [--backend URL] [--json] [--limit N]

Lists every lock, semaphore, read-write lock, election and job whose name starts with
PREFIX (all of them without it), one line each: kind, name, holder (the first of several,
then +N), fencing token, held for, time left, waiters, and permits used, an election's term
or a job's last slot and outcome. "-" where the store does not tell.
  --json   one JSON object per line, as the library's Inspection:
           {"kind","name","holders":[{"ownerId","token","heldMs","remainingMs",...}],
            "waiters":{"count"},"permits":{"used","limit"},"slots":[...]};
           tokens as decimal strings
  --limit N  list at most N names (default 10000, at most 100000)`;

/** The PREFIX positional of `ls`, `top` and `dashboard` (none: every name). */
export function prefixFrom(positionals: readonly string[], usage: string): string | undefined {
  if (positionals.length > 1) {
    throw new UsageError(`expected at most one PREFIX, got ${positionals.join(" ")}\n${usage}`);
  }
  return positionals[0];
}

/** `baton ls`. Resolves with the exit code. */
export async function lsCommand(
  argv: readonly string[],
  out: (s: string) => void,
): Promise<number> {
  const { values, positionals } = parse(argv, {
    backend: { type: "string" },
    json: { type: "boolean" },
    limit: { type: "string" },
  });
  if (values.help) {
    out(LS_USAGE);
    return 0;
  }
  const prefix = prefixFrom(positionals, LS_USAGE);
  const backend = backendFrom(values.backend, process.env);
  const limit = countOption(values.limit, "limit", SNAPSHOT_LIMIT, 1, 100_000);
  const { source, coordinator } = await openSource(backend);
  try {
    if (values.json === true) {
      const options = { limit, ...(prefix === undefined ? {} : { prefix }) };
      for await (const item of source.list(options)) out(inspectionJson(item));
      return 0;
    }
    const snapshot = await takeSnapshot(source, prefix, undefined, limit);
    for (const line of formatTable(snapshot.items.map(rowOf))) out(line);
    if (snapshot.truncated) out(`(only the first ${limit} names are shown: --limit)`);
    return 0;
  } finally {
    await coordinator.close().catch(() => undefined);
  }
}
