import { describe, inject, it } from "vitest";
import { decideBackend } from "./backend-decision.js";
import type { BackendKind } from "./backend-kind.js";
import type { BatonServers } from "./baton-servers.js";

function providedServers(): BatonServers | undefined {
  try {
    return inject("batonServers");
  } catch {
    return undefined;
  }
}

/**
 * Declares a `describe` block for one backend, wired to the harness:
 *
 * - runs `fn(url)` with the server URL from `inject("batonServers")`;
 * - skips the block when `BATON_BACKENDS` does not select the backend;
 * - when the server binaries are missing: under `CI=true` the block holds a
 *   single failing test naming what to install (so the run fails); locally
 *   it is skipped with a loud `console.warn`.
 *
 * `fn` runs at collection time in every case (also when skipped, with an
 * empty URL), so open connections in hooks or tests, not in its body.
 *
 * @param kind - the backend
 * @param fn - declares the tests; receives the server URL
 */
export function describeBackend(kind: BackendKind, fn: (url: string) => void): void {
  const decision = decideBackend(kind, providedServers());
  switch (decision.action) {
    case "run":
      describe(kind, () => fn(decision.url));
      return;
    case "skip":
      if (decision.loud) {
        console.warn(
          `\n[baton harness] SKIPPING ${kind} tests: ${decision.reason}\n` +
            "[baton harness] With CI=true this fails the run.\n",
        );
      }
      describe.skip(`${kind} (skipped: ${decision.reason})`, () => fn(""));
      return;
    case "fail":
      describe(kind, () => {
        it(`${kind} server is available`, () => {
          throw new Error(decision.reason);
        });
      });
      return;
  }
}

/**
 * The URL of a backend's server, for use inside tests and hooks.
 *
 * @throws Error with the reason when the backend is not selected or its
 *   server is unavailable
 */
export function backendUrl(kind: BackendKind): string {
  const decision = decideBackend(kind, providedServers());
  if (decision.action === "run") {
    return decision.url;
  }
  throw new Error(decision.reason);
}
