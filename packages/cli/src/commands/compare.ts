import { backendFrom, msOption, parse } from "../args.js";
import { runCompare } from "../compare/run-compare.js";
import { loadAdapter } from "../load-adapter.js";
import { UsageError } from "../usage-error.js";

export const COMPARE_USAGE = `usage: baton compare --backend URL [--backend URL ...] [--ttl MS] [--out DIR]

Plays the invoice story (see 'baton demo') on each backend, in efficiency mode (lock only,
lock + signal) and correctness mode (lock + fence), prints one table, and writes
DIR/compare-report.md and DIR/timeline-<backend>.svg (default DIR: compare-report).
  --ttl MS   lease length for every backend (default 2000, the least etcd accepts)`;

/** `baton compare`. Resolves with the exit code. */
export async function compareCommand(
  argv: readonly string[],
  out: (s: string) => void,
  err: (s: string) => void,
): Promise<number> {
  const { values } = parse(argv, {
    backend: { type: "string", multiple: true },
    ttl: { type: "string" },
    out: { type: "string" },
  });
  if (values.help) {
    out(COMPARE_USAGE);
    return 0;
  }
  const urls = Array.isArray(values.backend) ? values.backend : [];
  if (urls.length === 0) throw new UsageError(`at least one --backend URL\n${COMPARE_USAGE}`);
  const backends = urls.map((url) => {
    const checked = backendFrom(url, {});
    return { kind: checked.slice(0, checked.indexOf(":")), url: checked };
  });
  for (const { url } of backends) await loadAdapter(url);
  const ttlMs = msOption(values.ttl, "ttl", 2_000, 100);
  const outDir = typeof values.out === "string" ? values.out : "compare-report";
  const result = await runCompare({ backends, ttlMs, outDir, log: err });
  out(result.table);
  out(`\nReport: ${result.report}`);
  return 0;
}
