import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { redactUrl } from "@baton/core";
import { DEFAULT_SETTINGS, runInvoiceDemo } from "../demo/invoice-demo.js";
import { type BackendRun, compareMarkdown, compareTable } from "./compare-report.js";
import { timelineSvg } from "./timeline-svg.js";

/** Options of {@link runCompare}. */
export interface CompareOptions {
  /** Backends to compare: kind (for labels) and URL. */
  readonly backends: readonly { kind: string; url: string }[];
  /** Lease length for every backend (etcd needs 2000 or more). */
  readonly ttlMs: number;
  /** Where `compare-report.md` and the SVGs go. */
  readonly outDir: string;
  /** Progress lines. */
  readonly log?: (line: string) => void;
}

/**
 * Plays the invoice story on each backend in turn (all three variants side by side), then
 * writes `compare-report.md` and one `timeline-<kind>.svg` per backend into `outDir`.
 */
export async function runCompare(
  options: CompareOptions,
): Promise<{ runs: BackendRun[]; table: string; report: string }> {
  mkdirSync(options.outDir, { recursive: true });
  const runs: BackendRun[] = [];
  for (const { kind, url } of options.backends) {
    options.log?.(`compare: ${kind} ...`);
    const rows = await runInvoiceDemo({ ...DEFAULT_SETTINGS, ttlMs: options.ttlMs, backend: url });
    const svg = `timeline-${kind}.svg`;
    writeFileSync(join(options.outDir, svg), timelineSvg(kind, rows));
    runs.push({ kind, url: redactUrl(url), rows, svg });
  }
  const report = compareMarkdown(runs, {
    date: new Date().toISOString().slice(0, 10),
    ttlMs: options.ttlMs,
    node: process.version,
  });
  const path = join(options.outDir, "compare-report.md");
  writeFileSync(path, report);
  return { runs, table: compareTable(runs), report: path };
}
