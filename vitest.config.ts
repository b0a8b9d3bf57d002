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
    // Two test files at a time, also on two cores (vitest's default there is one): the suites
    // spend most of their time waiting out leases, not on the CPU. Measured on a clean clone
    // of the whole run: 767 s of vitest wall time for 1,475 s of tests.
    maxWorkers: 2,
    hookTimeout: 60_000,
    reporters: ["default", "./conformance/src/harness/summary-reporter.ts"],
  },
});
