/**
 * `@baton/core`: the coordinator (locks with leases and fencing tokens, leader election,
 * partitions), the `LockBackend` contract adapters implement, fences, the embedded memory
 * backend and Baton's named errors.
 *
 * @packageDocumentation
 * @module @baton/core
 */

// What adapters use from core: a session's end, leftover cleanup, sibling modules.
export { LeftoverCleanup } from "./adapter-support/leftover-cleanup.js";
export { SessionEnd } from "./adapter-support/session-end.js";
export { siblingModuleArgs } from "./adapter-support/sibling-module.js";
// The backend contract every adapter implements, with its guarantees and the fence.
export {
  type BackendAcquireOptions,
  type BackendPermitOptions,
  type BackendSession,
  type ForceReleaseOptions,
  type Grant,
  type Holder,
  type InspectedHolder,
  type KeepAliveResult,
  type KeyPage,
  type KeySpace,
  type KeyState,
  type KeyWaiters,
  type ListKeysOptions,
  type LockBackend,
  MAX_PERMITS,
  type OpenSessionOptions,
  type PermitHolder,
  type PermitMode,
  READ_WRITE_LIMIT,
  type RevokedGrant,
  type StoredRecord,
} from "./contract/backend.js";
export type { BackendUrl, HostPort } from "./contract/backend-url.js";
export { redactUrl } from "./contract/backend-url.js";
// Errors: every error Baton throws is a BatonError with a code.
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
} from "./contract/errors.js";
export type { Fence, FenceRaiseOptions } from "./contract/fence.js";
export type { Guarantees } from "./contract/guarantees.js";
export { isTransient } from "./contract/transient.js";
// The coordinator: the user-facing API, its options and its lock objects.
export { type Coordinator, createCoordinator } from "./coordinator.js";
export { type BackoffOptions, backoffMs } from "./helpers/backoff.js";
// Helpers for adapters and applications: bounded calls, backoff, clocks, signals, limits.
export { type BoundedCallOptions, boundedCall } from "./helpers/bounded-call.js";
export { type Clock, sleep, systemClock, type Timer, type TimerOptions } from "./helpers/clock.js";
export { linkSignals } from "./helpers/link-signals.js";
export { ManualClock } from "./helpers/manual-clock.js";
export { NameTable } from "./helpers/name-table.js";
export { onceAborted } from "./helpers/once-aborted.js";
export { PollBackoff } from "./helpers/poll-backoff.js";
export { checkOptions, LIMITS } from "./helpers/validate.js";
// Events, logging and metrics.
export type {
  CoordinatorEventName,
  CoordinatorEvents,
  CoordinatorListener,
} from "./kernel/events.js";
// Operations: inspection of the store's keys and forced release.
export {
  FORCE_RELEASE_REASON_MAX_LENGTH,
  type ForceReleaseRequest,
  type ForceReleaseResult,
} from "./kernel/force-release.js";
export type { InspectionKind } from "./kernel/inspection.js";
export { Lock, type LockJson } from "./kernel/lock.js";
export { defaultDriftMs } from "./kernel/managed-session.js";
export {
  type AcquireOptions,
  type CoordinatorOptions,
  checkCorrectness,
  DEFAULT_TTL_MS,
  DEFAULT_WAIT_MS,
  type Mode,
  type TryAcquireOptions,
} from "./kernel/options.js";
export { Permit } from "./kernel/permit.js";
// Backends by URL: the registry adapters register with.
export {
  type BackendFactory,
  type BackendUrlCheck,
  createBackend,
  declareBackendPackage,
  knownFencing,
  parseBackendUrl,
  type RegisterBackendOptions,
  registerBackend,
} from "./kernel/registry.js";
// The embedded memory backend and its fence.
export { MEMORY_GUARANTEES, MemoryBackend } from "./memory/memory-backend.js";
export { type FenceStats, MemoryFence } from "./memory/memory-fence.js";
export { type MemoryBackendOptions, memoryOptionsFromUrl } from "./memory/memory-options.js";
export { MemoryStore } from "./memory/memory-store.js";
export type { Logger } from "./observability/logger.js";
export {
  enableOpenTelemetry,
  type OpenTelemetryHandle,
  type OpenTelemetryOptions,
  type TelemetryAttributes,
  type TelemetryCounter,
  type TelemetryHistogram,
  type TelemetryInstrumentOptions,
  type TelemetryMeter,
  type TelemetryMeterProvider,
  type TelemetryObservableGauge,
  type TelemetryObservation,
  type TelemetrySpan,
  type TelemetrySpanContext,
  type TelemetrySpanOptions,
  type TelemetryTracer,
  type TelemetryTracerProvider,
} from "./opentelemetry.js";
export {
  enablePrometheus,
  type PrometheusHandle,
  type PrometheusOptions,
  type PrometheusRegistry,
} from "./prometheus.js";
// Recipes built on the lock API: withLock, elections, partitions, semaphores, read-write
// locks, runOnce and schedules.
export type {
  Election,
  ElectionOptions,
  Leader,
  RevokedReason,
  TermContext,
} from "./recipes/election.js";
export { ELECTION_MARKER_SUFFIX } from "./recipes/election-marker.js";
export {
  DEFAULT_LIST_LIMIT,
  INSPECTION_SLOTS,
  type Inspection,
  type InspectionHolder,
  type InspectionSlot,
  type InspectionWaiters,
  type InspectOptions,
  type ListOptions,
  RECORD_SCAN_LIMIT,
} from "./recipes/inspection.js";
export {
  decodeJobRecord,
  encodeJobRecord,
  type JobRecord,
  type JobRecordJson,
} from "./recipes/job-record.js";
export {
  fairShare,
  type PartitionContext,
  type PartitionOptions,
  type Partitions,
} from "./recipes/partitions.js";
export type { ReadWriteLock } from "./recipes/read-write-lock.js";
export type {
  RunContext,
  RunOnceOptions,
  RunOnceResult,
  RunOnceResultJson,
  RunOutcome,
} from "./recipes/run-once.js";
export type { Schedule, ScheduleOptions } from "./recipes/schedule.js";
export type {
  PermitAcquireOptions,
  PermitTryOptions,
  Semaphore,
  SemaphoreOptions,
} from "./recipes/semaphore.js";
export type { LockContext } from "./recipes/with-lock.js";
// Process shutdown: every coordinator steps down on a signal.
export { installStepDown, type StepDownOptions, stepDown } from "./step-down.js";
