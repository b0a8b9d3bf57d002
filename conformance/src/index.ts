export { type DeclaredCapabilities, runConformance } from "./suite/run-conformance.js";
export { delay, SuiteContext, settle } from "./suite/suite-context.js";
export type { ConformanceTarget } from "./suite/target.js";
