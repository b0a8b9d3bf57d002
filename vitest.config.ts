import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["packages/*/test/**/*.test.ts", "conformance/test/**/*.test.ts"],
    globalSetup: ["./conformance/src/harness/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    reporters: ["default", "./conformance/src/harness/summary-reporter.ts"],
  },
});
