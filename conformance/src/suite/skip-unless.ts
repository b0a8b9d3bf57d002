import { describe } from "vitest";

/**
 * Registers the tests of `register` when `condition` holds; otherwise registers them skipped,
 * under a title that says why, and prints the reason, so no skip goes unseen. For tests a
 * backend's declared guarantees rule out.
 */
export function skipUnless(condition: boolean, why: string, register: () => void): void {
  if (condition) {
    register();
    return;
  }
  console.warn(`[baton conformance] SKIPPED by declared guarantees: ${why}`);
  describe.skip(`skipped: ${why}`, register);
}
