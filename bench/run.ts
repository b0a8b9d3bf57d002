/**
 * `npm run bench [-- backend...]`: runs each backend's benchmark (bench/<backend>.ts, which
 * exports `run()`, starts its own servers through the conformance harness and returns its
 * results), prints the tables as it goes, and writes the report:
 *
 * - every backend (plain `npm run bench`): bench/RESULTS.md and bench/latency.svg;
 * - some backends (`npm run bench -- redis`): bench/RESULTS-partial.md and
 *   bench/latency-partial.svg (git-ignored), so a quick run never replaces the full report.
 *
 * `npm run bench` runs node with `--expose-gc` (for the memory-per-lock figure) and
 * `--import ./bench/lib/register-ts.mjs` (TypeScript's own transpiler instead of tsx, whose
 * keepNames wrapping would add to Baton's memory and CPU; see that file). Exit code 1 when a
 * part of the bench failed (the report then lists the error), 2 for an unknown backend.
 */
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { latencyChart } from "./lib/latency-chart.js";
import { machineInfo } from "./lib/machine.js";
import { onlySections, SECTIONS } from "./lib/only.js";
import { reportMarkdown } from "./lib/report-markdown.js";
import type { BackendResult } from "./lib/results.js";
import { checkTargets } from "./lib/targets.js";

const ALL = [
  "memory",
  "redis",
  "etcd",
  "zookeeper",
  "postgres",
  "mysql",
  "dynamodb",
  "azure-blob",
] as const;
// `--only service,scale` (or `--only=service`): only those sections (bench/lib/only.ts).
const argv = process.argv.slice(2).filter((a) => a !== "--");
const onlyAt = argv.findIndex((a) => a === "--only" || a.startsWith("--only="));
if (onlyAt >= 0) {
  const flag = argv[onlyAt] as string;
  const value = flag.includes("=") ? flag.slice(flag.indexOf("=") + 1) : argv[onlyAt + 1];
  argv.splice(onlyAt, flag.includes("=") ? 1 : 2);
  const unknown = (value ?? "")
    .split(",")
    .filter((s) => !(SECTIONS as readonly string[]).includes(s));
  if (value === undefined || unknown.length > 0) {
    console.error(`bench: --only takes sections from ${SECTIONS.join(", ")}`);
    process.exit(2);
  }
  process.env.BATON_BENCH_ONLY = value;
}
const asked = argv;
const chosen = asked.length > 0 ? [...new Set(asked)] : [...ALL];
for (const name of chosen) {
  if (!(ALL as readonly string[]).includes(name)) {
    console.error(`bench: unknown backend "${name}"; choose from ${ALL.join(", ")}`);
    process.exit(2);
  }
}
// In the order of ALL, whatever order they were asked in.
const backends = ALL.filter((b) => chosen.includes(b));
// A run of some sections (--only, BATON_BENCH_PERMITS_ONLY=1) is partial too.
const full = backends.length === ALL.length && onlySections() === undefined;

const machine = machineInfo();
const started = performance.now();
const results: BackendResult[] = [];
for (const name of backends) {
  const t0 = performance.now();
  try {
    const mod = (await import(`./${name}.ts`)) as { run: () => Promise<BackendResult> };
    results.push(await mod.run());
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    console.error(`\nbench ${name} failed: ${message}`);
    results.push({
      backend: name,
      server: "did not start",
      sections: [],
      errors: [`bench failed: ${message.split("\n")[0]}`],
      elapsedMs: performance.now() - t0,
    });
  }
  console.log(`\n[bench] ${name}: ${((performance.now() - t0) / 1000).toFixed(0)} s`);
}
const totalMs = performance.now() - started;

const targets = results.flatMap(checkTargets);
console.log("\ntargets:");
for (const t of targets) {
  const met = t.met === undefined ? "n/a " : t.met ? "met " : "MISS";
  console.log(`  ${met}  ${t.backend}: ${t.target}: ${t.measured}`);
}

const suffix = full ? "" : "-partial";
const chart = `latency${suffix}.svg`;
const reportFile = fileURLToPath(new URL(`./RESULTS${suffix}.md`, import.meta.url));
const chartFile = fileURLToPath(new URL(`./${chart}`, import.meta.url));
const subtitle = `${machine.date.slice(0, 10)}, ${machine.cpu} (${machine.cores} cores), Node ${machine.node}; bars: p50 ms, each backend on its own scale; labels: p50 and ratio to the floor`;
// The chart is the lock figures' (the memory backend has only permit figures).
writeFileSync(
  chartFile,
  latencyChart(
    results.filter((r) => r.scope !== "permits"),
    subtitle,
  ),
);
writeFileSync(reportFile, reportMarkdown({ machine, results, targets, all: ALL, totalMs, chart }));
// The repository's formatter aligns the tables, so `npm run lint` passes on a fresh report
// (a partial report is git-ignored, and so is left alone by the formatter).
if (suffix === "") {
  try {
    execFileSync(
      fileURLToPath(new URL("../node_modules/.bin/biome", import.meta.url)),
      ["format", "--write", reportFile],
      { stdio: "ignore" },
    );
  } catch {
    console.warn(`[bench] could not format ${reportFile} (npx biome format --write it)`);
  }
}
console.log(
  `\n[bench] ${backends.join(", ")} in ${(totalMs / 1000).toFixed(0)} s; wrote ${reportFile} and ${chartFile}`,
);
if (results.some((r) => r.errors.length > 0)) process.exitCode = 1;
