/**
 * `@baton/conformance`: the one suite every Baton backend passes (`runConformance`), the
 * history recorder and checker, and helpers for an adapter's own permit tests
 * (`semaphorePermits`, `readPermits`, `writePermits`, `track`, `measureWaiterLooks`, `expectLooksSoonAfterChange`). The harness, fault tools and
 * history checker are also published as the subpaths `@baton/conformance/harness`, `/faults` and `/history`.
 *
 * @packageDocumentation
 * @module @baton/conformance
 */
export {
  type AcquireOp,
  type AcquireResult,
  acquireFailure,
  acquireFailureOf,
  type CertainHold,
  type CheckOptions,
  certainHolds,
  checkHistory,
  History,
  type HistoryEntry,
  type PermitShare,
  RecordedCoordinator,
  RecordedWorker,
  type Violation,
  type ViolationKind,
} from "./history/index.js";
export { type RecordLossTarget, runRecordLoss } from "./suite/groups/record-loss.js";
export {
  type PermitOverrides,
  readPermits,
  semaphorePermits,
  writePermits,
} from "./suite/permit-options.js";
export { type DeclaredCapabilities, runConformance } from "./suite/run-conformance.js";
export { delay, SuiteContext, settle } from "./suite/suite-context.js";
export type { ConformanceTarget, ProxyTarget } from "./suite/target.js";
export { type Tracked, track } from "./suite/track.js";
export {
  expectLooksSoonAfterChange,
  measureWaiterLooks,
  type WaiterLooks,
  type WaiterLooksOptions,
} from "./suite/waiter-looks.js";
