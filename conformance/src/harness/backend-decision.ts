import type { BackendKind } from "./backend-kind.js";
import type { BatonServers } from "./baton-servers.js";
import { INSTALL_HINT } from "./server-binaries.js";

/** The URL handed to `memory` backend tests (no server behind it). */
export const MEMORY_URL = "memory:";

/** What a test block for one backend should do. */
export type BackendDecision =
  | { readonly action: "run"; readonly url: string }
  | { readonly action: "skip"; readonly reason: string; readonly loud: boolean }
  | { readonly action: "fail"; readonly reason: string };

/** True when `CI` is `true` (or `1`): missing servers then fail the run. */
export function isCI(env: NodeJS.ProcessEnv = process.env): boolean {
  const value = (env.CI ?? "").toLowerCase();
  return value === "true" || value === "1";
}

/**
 * Decides whether tests for `kind` run, are skipped or fail.
 *
 * - not selected by `BATON_BACKENDS`: skip quietly;
 * - server binaries missing: fail under `CI=true`, otherwise skip loudly
 *   (the reason says what to install);
 * - harness not set up, or the server is missing for another reason: fail;
 * - otherwise run, with the server's URL.
 *
 * @param kind - the backend
 * @param servers - what the harness provided (`inject("batonServers")`)
 * @param env - where `CI` is read
 */
export function decideBackend(
  kind: BackendKind,
  servers: BatonServers | undefined,
  env: NodeJS.ProcessEnv = process.env,
): BackendDecision {
  if (servers === undefined) {
    return {
      action: "fail",
      reason:
        'no "batonServers" provided: run through the root vitest.config.ts, whose globalSetup is conformance/src/harness/global-setup.ts',
    };
  }
  if (!servers.selected.includes(kind)) {
    return { action: "skip", reason: `${kind} not selected by BATON_BACKENDS`, loud: false };
  }
  if (kind === "memory") {
    return { action: "run", url: MEMORY_URL };
  }
  const unavailable = servers.unavailable[kind];
  if (unavailable !== undefined) {
    const reason = `${kind} server unavailable: ${unavailable}`;
    if (isCI(env)) {
      return { action: "fail", reason: `${reason} (CI=true: missing servers fail the run)` };
    }
    return { action: "skip", reason, loud: true };
  }
  const url = servers[kind];
  if (url === undefined) {
    return {
      action: "fail",
      reason: `${kind} was selected but the harness provided no URL for it (install: ${INSTALL_HINT})`,
    };
  }
  return { action: "run", url };
}
