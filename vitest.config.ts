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
    hookTimeout: 60_000,
    reporters: ["default", "./conformance/src/harness/summary-reporter.ts"],
  },
});
