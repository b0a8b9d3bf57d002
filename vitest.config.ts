import { defaultServerConditions } from "vite";
import { defineConfig } from "vitest/config";

// "@baton/source" resolves the workspace packages to their TypeScript sources, so tests run
// without a build; published packages resolve to dist/ instead. Vite's "module" condition is
// left out: it picks bundler-only builds (the AWS SDK's and OpenTelemetry's dist-es, whose
// imports have no file extensions) that Node itself, and so a consumer's process, never loads.
const conditions = [
  "@baton/source",
  ...defaultServerConditions.filter((condition) => condition !== "module"),
];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    include: [
      "packages/*/test/**/*.test.ts",
      "conformance/test/**/*.test.ts",
      "packaging/test/**/*.test.ts",
    ],
    globalSetup: ["./conformance/src/harness/global-setup.ts"],
    testTimeout: 30_000,
    // Three test files at a time, also on two cores (vitest's default there is one): the suites
    // spend most of their time waiting out leases, not on the CPU. Measured on a clean clone
    // of the whole run on two cores: 1,456 s of vitest wall time for 3,863 s of tests, the
    // test processes using 0.9 of a core on average (two files at a time would take about
    // 1,930 s).
    maxWorkers: 3,
    hookTimeout: 60_000,
    reporters: ["default", "./conformance/src/harness/summary-reporter.ts"],
  },
});
