#!/usr/bin/env node
/**
 * `npm test`: makes sure the servers the selected backends need (and Chromium, for the dashboard's
 * page test) are installed (installing them
 * with apt-get when run as root, otherwise stopping before any test with the command to run),
 * builds the API reference, then runs every test with vitest. Extra arguments go to vitest.
 *
 * `BATON_BACKENDS=memory npm test` is the quick run that needs no server.
 */
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const listed = (process.env.BATON_BACKENDS ?? "")
  .split(",")
  .map((s) => s.trim().toLowerCase())
  .filter((s) => s !== "");

function run(step, command, args) {
  const started = performance.now();
  const result = spawnSync(command, args, { cwd: root, stdio: "inherit" });
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  if (result.error !== undefined || result.status !== 0) {
    const why = result.error?.message ?? `exit code ${result.status ?? result.signal}`;
    console.error(`npm test: ${step} failed (${why}, ${seconds} s); no tests were run after it.`);
    process.exit(result.status || 1);
  }
  console.log(`npm test: ${step} done in ${seconds} s`);
}

// Unset: install-servers.sh checks the servers of every backend an unset BATON_BACKENDS runs,
// and the browser. The `baton dashboard` page test runs on Redis and PostgreSQL in Chromium.
if (listed.length === 0 || listed.some((kind) => kind !== "memory")) {
  const browser = listed.some((kind) => kind === "redis" || kind === "postgres")
    ? ["chromium"]
    : [];
  run("server check", "bash", [join(root, "scripts/install-servers.sh"), ...listed, ...browser]);
}
run("API reference (npm run docs)", process.execPath, [
  join(root, "node_modules/typedoc/bin/typedoc"),
  "--treatWarningsAsErrors",
  "--logLevel",
  "Warn",
]);
const vitest = spawnSync(
  process.execPath,
  [join(root, "node_modules/vitest/vitest.mjs"), "run", ...process.argv.slice(2)],
  { cwd: root, stdio: "inherit" },
);
process.exit(vitest.status ?? 1);
