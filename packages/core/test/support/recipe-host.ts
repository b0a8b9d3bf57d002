import { ConfigError, systemClock } from "../../src/index.js";
import type { LockClient, RecipeHost } from "../../src/kernel/index.js";
import { EventHub } from "../../src/observability/event-hub.js";

/**
 * A recipe host over `locks` with no kernel behind it: a recipe under test gets exactly the
 * extension point and nothing else. Every member can be replaced through `overrides`; errors
 * reported go to `reports`.
 */
export function fakeRecipeHost(
  locks: LockClient,
  overrides: Partial<RecipeHost> = {},
): RecipeHost & { reports: unknown[] } {
  const reports: unknown[] = [];
  const noPermits = () => Promise.reject(new ConfigError("backend", "no permits in this host"));
  return {
    locks,
    clock: systemClock,
    events: new EventHub(),
    report: (error) => {
      reports.push(error);
    },
    assertOpen: () => undefined,
    track: () => () => undefined,
    knownGuarantees: () => undefined,
    backendKind: () => "fake",
    acquirePermits: noPermits,
    permitHolders: noPermits,
    records: () => Promise.reject(new ConfigError("backend", "no records in this host")),
    inspection: () => Promise.reject(new ConfigError("backend", "no inspection in this host")),
    forceRelease: () =>
      Promise.reject(new ConfigError("backend", "no forced release in this host")),
    ...overrides,
    reports,
  };
}
