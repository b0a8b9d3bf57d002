import { BackendUnavailableError, sleep, systemClock } from "@baton/core";
import { backendFrom, msOption, parse } from "../args.js";
import { openSource } from "../inspect/open-source.js";
import { formatTable, type Row, rowOf } from "../inspect/rows.js";
import { itemKey, type Snapshot, takeSnapshot } from "../inspect/snapshot.js";
import { onSignals } from "../run-child.js";
import { prefixFrom } from "./ls.js";

export const TOP_USAGE = `usage: baton top [PREFIX] [--backend URL] [--interval MS]

What baton ls shows, refreshed about once a second (--interval, default 1000 ms) until
Ctrl-C. A line is marked + when the name appeared, * when its holder, token, waiters or
permits changed, and - (shown once) when it went away. On a terminal the screen is redrawn
in place; otherwise every refresh is printed in full after a line with the time.
A store that cannot be reached is reported on the screen and retried.`;

/** What a line of `top` is compared on between refreshes (not the times, which always move). */
function signature(row: Row): string {
  return [row.holder, row.token, row.waiters, row.note].join("\u0000");
}

/** The rows of `next` with their marks against `prev` (+ new, * changed, - gone). */
export function markRows(
  prev: Snapshot | undefined,
  next: Snapshot,
): { rows: Row[]; marks: string[] } {
  const before = new Map((prev?.items ?? []).map((i) => [itemKey(i), signature(rowOf(i))]));
  const rows: Row[] = [];
  const marks: string[] = [];
  const present = new Set<string>();
  for (const item of next.items) {
    const key = itemKey(item);
    present.add(key);
    const row = rowOf(item);
    const old = before.get(key);
    rows.push(row);
    marks.push(
      prev === undefined ? " " : old === undefined ? "+" : old !== signature(row) ? "*" : " ",
    );
  }
  for (const item of prev?.items ?? []) {
    if (present.has(itemKey(item))) continue;
    rows.push({ ...rowOf(item), holder: "-", token: "-", held: "-", left: "-", waiters: "0" });
    marks.push("-");
  }
  return { rows, marks };
}

/** `baton top`. Resolves with the exit code once interrupted. */
export async function topCommand(
  argv: readonly string[],
  out: (s: string) => void,
): Promise<number> {
  const { values, positionals } = parse(argv, {
    backend: { type: "string" },
    interval: { type: "string" },
  });
  if (values.help) {
    out(TOP_USAGE);
    return 0;
  }
  const prefix = prefixFrom(positionals, TOP_USAGE);
  const backend = backendFrom(values.backend, process.env);
  const intervalMs = msOption(values.interval, "interval", 1_000, 100, 60_000);
  const tty = process.stdout.isTTY === true;
  const { source, coordinator } = await openSource(backend);
  const stop = new AbortController();
  const off = onSignals(() => stop.abort());
  // Alternate screen and hidden cursor while redrawing in place; both restored on the way out.
  if (tty) process.stdout.write("\x1b[?1049h\x1b[?25l");
  let prev: Snapshot | undefined;
  try {
    while (!stop.signal.aborted) {
      const started = performance.now();
      const header = `baton top ${prefix ?? ""}  ${new Date().toISOString()}`;
      let lines: string[];
      try {
        const next = await takeSnapshot(source, prefix, stop.signal);
        const { rows, marks } = markRows(prev, next);
        prev = next;
        lines = [
          `${header}  ${next.items.length} names, read in ${Math.round(next.tookMs)} ms`,
          ...formatTable(rows, marks),
        ];
        if (next.truncated) lines.push(`(only the first ${next.items.length} names are shown)`);
      } catch (error) {
        if (stop.signal.aborted) break;
        if (!(error instanceof BackendUnavailableError)) throw error;
        lines = [header, `store unreachable, retrying: ${error.message}`];
      }
      if (tty) {
        // A terminal that does not tell its size (0 rows) gets 50 lines.
        const rows = process.stdout.rows || 50;
        const shown =
          lines.length < rows
            ? lines
            : [...lines.slice(0, rows - 2), `(${lines.length - rows + 2} more lines)`];
        process.stdout.write(`\x1b[H\x1b[2J${shown.join("\n")}`);
      } else {
        for (const line of lines) out(line);
        out("");
      }
      const rest = intervalMs - (performance.now() - started);
      await sleep(systemClock, Math.max(0, rest), stop.signal).catch(() => undefined);
    }
    return 0;
  } finally {
    off();
    if (tty) process.stdout.write("\x1b[?25h\x1b[?1049l");
    await coordinator.close().catch(() => undefined);
  }
}
