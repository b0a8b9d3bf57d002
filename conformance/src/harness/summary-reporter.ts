import type { Reporter, SerializedError, TestModule, TestRunEndReason, Vitest } from "vitest/node";

/** Test counts for the final summary line. */
export interface TestCounts {
  /** Tests that passed. */
  readonly passed: number;
  /**
   * Tests that failed, plus one per test file that failed without a failing
   * test (an import error, a failing `afterAll`), plus unhandled errors; at
   * least 1 when the run failed for any other reason (e.g. a server did not
   * start), so the line never reads "0 failed" for a failed run.
   */
  readonly failed: number;
  /** Tests skipped or marked todo. */
  readonly skipped: number;
}

/**
 * Counts the results of a finished run.
 *
 * @param testModules - the modules vitest reports at the end of the run
 * @param unhandledErrors - errors outside any test; each counts as a failure
 */
export function countResults(
  testModules: readonly TestModule[],
  unhandledErrors: readonly unknown[] = [],
  reason: TestRunEndReason = "passed",
): TestCounts {
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  for (const module of testModules) {
    let moduleFailed = 0;
    for (const test of module.children.allTests()) {
      const state = test.result().state;
      if (state === "passed") passed += 1;
      else if (state === "failed") moduleFailed += 1;
      else if (state === "skipped") skipped += 1;
    }
    if (moduleFailed === 0 && module.state() === "failed") {
      moduleFailed = 1;
    }
    failed += moduleFailed;
  }
  failed += unhandledErrors.length;
  if (reason === "failed" && failed === 0) {
    failed = 1;
  }
  return { passed, failed, skipped };
}

/** The line CI tooling reads: `Tests: N passed, N failed, N skipped`. */
export function formatSummaryLine(counts: TestCounts): string {
  return `Tests: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`;
}

/**
 * A vitest reporter used next to the default one: after the run it prints a
 * single plain line, `Tests: N passed, N failed, N skipped`, on its own line.
 */
export default class SummaryLineReporter implements Reporter {
  #vitest: Vitest | undefined;

  /** Keeps vitest's logger, so the line is written where the default reporter writes. */
  onInit(vitest: Vitest): void {
    this.#vitest = vitest;
  }

  /** Prints the summary line after the default reporter's summary. */
  onTestRunEnd(
    testModules: ReadonlyArray<TestModule>,
    unhandledErrors: ReadonlyArray<SerializedError>,
    reason: TestRunEndReason,
  ): void {
    const line = formatSummaryLine(countResults(testModules, unhandledErrors, reason));
    if (this.#vitest) {
      this.#vitest.logger.log(line);
    } else {
      process.stdout.write(`${line}\n`);
    }
  }
}
