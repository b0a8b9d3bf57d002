import { backendFrom, parse } from "../args.js";
import { openSource } from "../inspect/open-source.js";
import { formatTable, inspectionJson, rowOf } from "../inspect/rows.js";
import { takeSnapshot } from "../inspect/snapshot.js";
import { UsageError } from "../usage-error.js";

export const LS_USAGE = `usage: baton ls [PREFIX] [--backend URL] [--json]

Lists every lock, semaphore, read-write lock, election and job whose name starts with
PREFIX (all of them without it), one line each: kind, name, holder (the first of several,
then +N), fencing token, held for, time left, waiters, and permits used, an election's term
or a job's last slot and outcome. "-" where the store does not tell.
  --json   one JSON object per line, as the library's Inspection:
           {"kind","name","holders":[{"ownerId","token","heldMs","remainingMs",...}],
            "waiters":{"count"},"permits":{"used","limit"},"slots":[...]};
           tokens as decimal strings`;

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
  });
  if (values.help) {
    out(LS_USAGE);
    return 0;
  }
  const prefix = prefixFrom(positionals, LS_USAGE);
  const backend = backendFrom(values.backend, process.env);
  const { source, coordinator } = await openSource(backend);
  try {
    if (values.json === true) {
      const options = prefix === undefined ? {} : { prefix };
      for await (const item of source.list(options)) out(inspectionJson(item));
      return 0;
    }
    const snapshot = await takeSnapshot(source, prefix);
    for (const line of formatTable(snapshot.items.map(rowOf))) out(line);
    if (snapshot.truncated) out(`(only the first ${snapshot.items.length} names are shown)`);
    return 0;
  } finally {
    await coordinator.close().catch(() => undefined);
  }
}
