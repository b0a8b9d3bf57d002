import type { TestProject } from "vitest/node";
import { startServers } from "./start-servers.js";

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(2)} s`;
}

/** True when the run had failures (then the servers' logs are kept). */
function runFailed(project: TestProject): boolean {
  try {
    const state = project.vitest.state;
    return (
      state.getCountOfFailedTests() > 0 ||
      state.getFailedFilepaths().length > 0 ||
      state.getUnhandledErrors().length > 0
    );
  } catch {
    return process.exitCode !== undefined && process.exitCode !== 0;
  }
}

/**
 * vitest globalSetup: starts the servers selected by `BATON_BACKENDS` (all
 * by default) in parallel, provides their URLs as `batonServers` (read
 * them with `inject("batonServers")`), and stops them by PID afterwards.
 * The temp dir with logs is kept when tests failed or `BATON_KEEP_LOGS=1`.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const startedAt = performance.now();
  const started = await startServers();
  const { servers } = started;
  const running = Object.keys(started.groups);
  const names =
    servers.provider === "local" ? running : servers.selected.filter((k) => k !== "memory");
  const elapsed = seconds(performance.now() - startedAt);
  const where = started.workDir ? `, dir ${started.workDir}` : "";
  console.log(
    names.length > 0
      ? `[baton harness] ${names.join(", ")} ready in ${elapsed} (provider ${servers.provider}${where})`
      : "[baton harness] no servers to start",
  );
  for (const [kind, reason] of Object.entries(servers.unavailable)) {
    console.warn(`[baton harness] WARNING: ${kind} unavailable: ${reason}`);
  }
  project.provide("batonServers", servers);

  return async () => {
    const stoppingAt = performance.now();
    const report = await started.stop({ keepLogs: runFailed(project) });
    const kept = report.keptWorkDir ? `; logs kept in ${report.keptWorkDir}` : "";
    if (names.length > 0) {
      console.log(
        `[baton harness] servers stopped in ${seconds(performance.now() - stoppingAt)}${kept}`,
      );
    }
  };
}
