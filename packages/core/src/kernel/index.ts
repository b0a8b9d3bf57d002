/**
 * The kernel's door: the one module a recipe imports from the kernel. Everything else in
 * `kernel/` is the kernel's own.
 */
export type { CoordinatorEventHub, CoordinatorEvents } from "./events.js";
export {
  checkForceRelease,
  type ForceReleaseRequest,
  type ForceReleaseResult,
  noForceReleaseError,
} from "./force-release.js";
export type { InspectionAccess, InspectionKind } from "./inspection.js";
export { noPermitsError, noRecordsError } from "./kernel-errors.js";
export { grantToken, Lock, type LockJson } from "./lock.js";
export {
  type AcquireOptions,
  type ResolvedAcquire,
  resolveAcquireOptions,
  type TryAcquireOptions,
} from "./options.js";
export type { Permit, PermitRequest } from "./permit.js";
export type { LockClient, RecipeHost, RecordAccess } from "./recipe-host.js";
