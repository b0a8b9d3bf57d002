/**
 * `@baton/core`: the coordinator (locks with leases and fencing tokens, leader election,
 * partitions), the `LockBackend` contract adapters implement, fences, the embedded memory
 * backend and Baton's named errors.
 *
 * @packageDocumentation
 * @module @baton/core
 */
export {
  type BackendAcquireOptions,
  type BackendPermitOptions,
  type BackendSession,
  type Grant,
  type Holder,
  type KeepAliveResult,
  type LockBackend,
  MAX_PERMITS,
  type OpenSessionOptions,
  type PermitHolder,
  type PermitMode,
  READ_WRITE_LIMIT,
  type StoredRecord,
} from "./backend.js";
export type { BackendUrl, HostPort } from "./backend-url.js";
export { redactUrl } from "./backend-url.js";
export { type BackoffOptions, backoffMs } from "./backoff.js";
export { type BoundedCallOptions, boundedCall } from "./bounded-call.js";
export { type Clock, sleep, systemClock, type Timer, type TimerOptions } from "./clock.js";
export { type Coordinator, createCoordinator, type LockContext } from "./coordinator.js";
export {
  type AcquireOptions,
  type CoordinatorOptions,
  checkCorrectness,
  DEFAULT_TTL_MS,
  DEFAULT_WAIT_MS,
  type Mode,
  type TryAcquireOptions,
} from "./coordinator-options.js";
export type {
  Election,
  ElectionOptions,
  Leader,
  RevokedReason,
  TermContext,
} from "./election.js";
export {
  AuthenticationError,
  asUnavailable,
  BackendUnavailableError,
  BatonError,
  type BatonErrorCode,
  ConfigError,
  CoordinatorClosedError,
  isAbortError,
  LockHeldError,
  LockLostError,
  type LockLostReason,
  LockTimeoutError,
  PermitLimitError,
  RunTimeoutError,
  ScheduleStoppedError,
  SessionLostError,
  StaleTokenError,
} from "./errors.js";
export type {
  CoordinatorEventName,
  CoordinatorEvents,
  CoordinatorListener,
  Logger,
} from "./events.js";
export type { Fence, FenceRaiseOptions } from "./fence.js";
export type { Guarantees } from "./guarantees.js";
export {
  decodeJobRecord,
  encodeJobRecord,
  type JobRecord,
  type JobRecordJson,
} from "./job-record.js";
export { LeftoverCleanup } from "./leftover-cleanup.js";
export { linkSignals } from "./link-signals.js";
export { Lock, type LockJson } from "./lock.js";
export { defaultDriftMs } from "./managed-session.js";
export { ManualClock } from "./manual-clock.js";
export { MEMORY_GUARANTEES, MemoryBackend } from "./memory-backend.js";
export { type FenceStats, MemoryFence } from "./memory-fence.js";
export { type MemoryBackendOptions, memoryOptionsFromUrl } from "./memory-options.js";
export { MemoryStore } from "./memory-store.js";
export {
  fairShare,
  type PartitionContext,
  type PartitionOptions,
  type Partitions,
} from "./partitions.js";
export { Permit } from "./permit.js";
export {
  enablePrometheus,
  type PrometheusHandle,
  type PrometheusOptions,
  type PrometheusRegistry,
} from "./prometheus.js";
export type { ReadWriteLock } from "./read-write-lock.js";
export {
  type BackendFactory,
  type BackendUrlCheck,
  createBackend,
  declareBackendPackage,
  knownFencing,
  parseBackendUrl,
  type RegisterBackendOptions,
  registerBackend,
} from "./registry.js";
export type {
  RunContext,
  RunOnceOptions,
  RunOnceResult,
  RunOnceResultJson,
  RunOutcome,
} from "./run-once.js";
export type { Schedule, ScheduleOptions } from "./schedule.js";
export type {
  PermitAcquireOptions,
  PermitTryOptions,
  Semaphore,
  SemaphoreOptions,
} from "./semaphore.js";
export { SessionEnd } from "./session-end.js";
export { onceAborted } from "./shared-abort.js";
export { siblingModuleArgs } from "./sibling-module.js";
export { installStepDown, type StepDownOptions, stepDown } from "./step-down.js";
export { isTransient } from "./transient.js";
export { LIMITS } from "./validate.js";
