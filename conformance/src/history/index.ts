/**
 * The history recorder and checker: record what every process did on the test runner's
 * monotonic clock, then check for overlapping holds, more permits held than a semaphore or
 * read-write lock allows, tokens that do not rise, a fence that accepts a stale token or loses
 * an acknowledged write.
 *
 * @packageDocumentation
 * @module @baton/conformance/history
 */
export { acquireFailure, acquireFailureOf } from "./acquire-outcome.js";
export { type CertainHold, certainHolds, type HoldEnd } from "./certain-holds.js";
export {
  type CheckOptions,
  checkHistory,
  type Violation,
  type ViolationKind,
} from "./check-history.js";
export {
  type AcquireHandle,
  type AcquireOp,
  type AcquireResult,
  describeEntry,
  formatTime,
  History,
  type HistoryEntry,
  type LostEvent,
  type PermitShare,
  type ProcessEvent,
  READ_SHARE,
  type ReadOp,
  type ReleaseHandle,
  type ReleaseOp,
  type ReleaseResult,
  type RenewEvent,
  WRITE_SHARE,
  type WriteHandle,
  type WriteOp,
} from "./history.js";
export { RecordedCoordinator } from "./recorded-coordinator.js";
export { RecordedWorker, type RecordedWorkerOptions, type WroteEvent } from "./recorded-worker.js";
