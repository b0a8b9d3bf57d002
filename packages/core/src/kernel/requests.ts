import type {
  BackendAcquireOptions,
  BackendPermitOptions,
  BackendSession,
  Grant,
  PermitMode,
} from "../contract/backend.js";
import type { Fence } from "../contract/fence.js";
import type { AbortScope } from "../helpers/abort-scope.js";
import { noPermitsError } from "./kernel-errors.js";
import type { PermitRequest } from "./permit.js";

/** What one attempt sends: the name, whether it waits, the value to publish, its scope. */
export interface Attempt {
  readonly name: string;
  readonly waiting: boolean;
  readonly options: { readonly value?: string | undefined };
  readonly scope: AbortScope;
}

/**
 * What an acquire asks the backend for, and what follows from it in the acquire pipeline: a
 * lock (one holder per name) or permits of a semaphore or read-write lock (many holders).
 */
export interface GrantRequest {
  /**
   * One holder per name: the call waits in this process's queue for the name first, gets
   * hand-off windows, and a wait given up on has nothing to clean up at the store. Permits
   * of one name are held many at once, so they skip the queue, and a permit wait given up
   * on waits (briefly) for the backend to take its queue entry out.
   */
  readonly exclusive: boolean;
  /** What `acquirePermits` is asked, kept on the held permit; undefined for a lock. */
  readonly permit: PermitRequest | undefined;
  /** The fence a grant raises before the hand-over, given the coordinator's. */
  fence(coordinatorFence: Fence | undefined): Fence | undefined;
  /** The backend call of one attempt. */
  send(session: BackendSession, attempt: Attempt): Promise<Grant | null>;
}

/** A lock: the backend's `acquire`; the grant raises the coordinator's fence. */
export const LOCK_REQUEST: GrantRequest = {
  exclusive: true,
  permit: undefined,
  fence: (coordinatorFence) => coordinatorFence,
  send: (session, attempt) =>
    session.acquire(
      attempt.name,
      new ScopedAcquireOptions(attempt.waiting, attempt.options.value, attempt.scope),
    ),
};

/**
 * Permits: the backend's `acquirePermits`. Only a write raises the coordinator's fence: a
 * semaphore's permits and reads are held many at once and share their order with the writes.
 */
export class PermitsRequest implements GrantRequest {
  readonly exclusive = false;
  readonly permit: PermitRequest;

  constructor(permit: PermitRequest) {
    this.permit = permit;
  }

  fence(coordinatorFence: Fence | undefined): Fence | undefined {
    return this.permit.mode === "write" ? coordinatorFence : undefined;
  }

  send(session: BackendSession, attempt: Attempt): Promise<Grant | null> {
    if (session.acquirePermits === undefined) throw noPermitsError();
    return session.acquirePermits(
      attempt.name,
      new ScopedPermitOptions(attempt.waiting, attempt.options.value, attempt.scope, this.permit),
    );
  }
}

/**
 * A backend's acquire options whose `signal` is built only when the backend reads it: a class
 * with a prototype getter, not an object literal with a getter.
 */
class ScopedAcquireOptions implements BackendAcquireOptions {
  // Hot path: see docs/hot-path.md, "Core".
  readonly wait: boolean;
  readonly value: string | undefined;
  readonly #scope: AbortScope;

  constructor(wait: boolean, value: string | undefined, scope: AbortScope) {
    this.wait = wait;
    this.value = value;
    this.#scope = scope;
  }

  get signal(): AbortSignal {
    return this.#scope.signal;
  }
}

/**
 * A backend's permit options: a lock's, with the key's limit, the grant's share and its
 * token rule.
 */
class ScopedPermitOptions extends ScopedAcquireOptions implements BackendPermitOptions {
  readonly limit: number;
  readonly permits: number;
  readonly mode: PermitMode;

  constructor(wait: boolean, value: string | undefined, scope: AbortScope, permit: PermitRequest) {
    super(wait, value, scope);
    this.limit = permit.limit;
    this.permits = permit.permits;
    this.mode = permit.mode;
  }
}
