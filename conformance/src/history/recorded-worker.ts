import type { LockWorker } from "../faults/spawn-lock-worker.js";
import type { WorkerCommand, WorkerEvent } from "../faults/worker-protocol.js";
import { acquireFailure } from "./acquire-outcome.js";
import type { AcquireHandle, History, PermitShare, ReleaseHandle } from "./history.js";

/** A `wrote` event from a worker. */
export type WroteEvent = Extract<WorkerEvent, { event: "wrote" }>;

/** Options of {@link RecordedWorker}. */
export interface RecordedWorkerOptions {
  /**
   * Called with every `wrote` event as it is received: apply the write to the store under
   * test (a fence, a plain log) and record it in the history.
   */
  readonly onWrite?: (event: WroteEvent) => void;
}

/**
 * A lock worker whose acquires, releases, losses and failed renewals go into a
 * {@link History} under the name `process`, timestamped when the runner receives each event
 * (the worker's own clock is never used). Send lock commands through `acquire()` and
 * `release()` (they record the invocation); pause, resume and kill through this class (they
 * record the process event).
 *
 * The worker answers acquires and releases in order, and its error events carry no lock
 * name, so an `error` for `acquire` completes the oldest pending acquire. Permits (of a
 * semaphore, a read or a write lock) are named by a hold id of the caller's choosing, which
 * every answer about them carries: several may be held or waited for at once.
 */
export class RecordedWorker {
  readonly history: History;
  readonly process: string;
  readonly worker: LockWorker;
  readonly #acquires: AcquireHandle[] = [];
  readonly #releases: ReleaseHandle[] = [];
  readonly #permitAcquires = new Map<string, AcquireHandle>();
  readonly #permitReleases = new Map<string, ReleaseHandle>();
  readonly #stop: () => void;

  constructor(
    history: History,
    process: string,
    worker: LockWorker,
    options: RecordedWorkerOptions = {},
  ) {
    this.history = history;
    this.process = process;
    this.worker = worker;
    this.#stop = worker.onEvent((event) => this.#receive(event, options));
  }

  /** Sends an acquire and records its invocation; the outcome is recorded on receipt. */
  acquire(name: string, options: { waitMs?: number; value?: string } = {}): void {
    this.#acquires.push(this.history.invokeAcquire(this.process, name));
    this.worker.send({ op: "acquire", name, ...options });
  }

  /** Sends a release and records its invocation. */
  release(name: string): void {
    this.#releases.push(this.history.invokeRelease(this.process, name));
    this.worker.send({ op: "release", name });
  }

  /**
   * Sends an acquire of permits (`share.mode` "permit": `share.permits` of semaphore `name`
   * with `share.limit` permits; "read" or "write": of read-write lock `name`) to be known as
   * `hold`, and records its invocation; the outcome is recorded on receipt.
   */
  acquirePermits(
    name: string,
    share: PermitShare,
    hold: string,
    options: { waitMs?: number } = {},
  ): void {
    this.#permitAcquires.set(hold, this.history.invokePermits(this.process, name, share, hold));
    this.worker.send({
      op: "acquire-permits",
      name,
      hold,
      mode: share.mode,
      ...(share.mode === "permit" ? { permits: share.permits, limit: share.limit } : {}),
      ...options,
    });
  }

  /** Sends a release of the permits `hold` (of `name`) and records its invocation. */
  releasePermits(name: string, hold: string): void {
    this.#permitReleases.set(
      hold,
      this.history.invokeRelease(this.process, name, this.history.now(), hold),
    );
    this.worker.send({ op: "release-permits", hold });
  }

  /** Sends any other command (writes, ticks) unrecorded. */
  send(command: WorkerCommand): void {
    this.worker.send(command);
  }

  /** SIGSTOP; recorded just before the signal is sent, so no hold outlives the record. */
  pause(): void {
    this.history.pause(this.process);
    this.worker.pause();
  }

  /** SIGCONT; recorded just after the signal is sent. */
  resume(): void {
    this.worker.resume();
    this.history.resume(this.process);
  }

  /** SIGKILL; recorded just before the signal is sent. */
  async kill(): Promise<void> {
    if (this.worker.exited) return;
    this.history.crash(this.process);
    await this.worker.kill();
  }

  /** Stops recording this worker's events. */
  detach(): void {
    this.#stop();
  }

  #receive(event: WorkerEvent, options: RecordedWorkerOptions): void {
    const at = this.history.now();
    switch (event.event) {
      case "acquired":
        this.#acquires.shift()?.ok(BigInt(event.token), { at });
        return;
      case "released":
        this.#releases.shift()?.done(event.wasHeld, at);
        return;
      case "permits-acquired":
        this.#permitAcquires.get(event.hold)?.ok(BigInt(event.token), { at });
        this.#permitAcquires.delete(event.hold);
        return;
      case "permits-released":
        this.#permitReleases.get(event.hold)?.done(event.wasHeld, at);
        this.#permitReleases.delete(event.hold);
        return;
      case "permits-lost":
      case "lost":
        this.history.lost(this.process, event.name, {
          token: BigInt(event.token),
          reason: event.reason,
          at,
          ...(event.event === "permits-lost" ? { hold: event.hold } : {}),
        });
        return;
      case "error":
        if (event.op === "acquire-permits" && event.hold !== undefined) {
          const handle = this.#permitAcquires.get(event.hold);
          this.#permitAcquires.delete(event.hold);
          failAcquire(handle, event, at);
        } else if (event.op === "acquire") {
          failAcquire(this.#acquires.shift(), event, at);
        } else if (event.op === "release") {
          this.#releases.shift()?.unknown(`${event.code}: ${event.message}`, at);
        }
        return;
      case "renewFailed":
        this.history.renew(this.process, { ok: false, at });
        return;
      case "wrote":
        options.onWrite?.(event);
        return;
      default:
        return;
    }
  }
}

/** Records a worker's `error` for an acquire as its failure, or as unknown where it may hold. */
function failAcquire(
  handle: AcquireHandle | undefined,
  event: { readonly code: string; readonly message: string },
  at: number,
): void {
  const failure = acquireFailure(event.code, event.message);
  if (failure.status === "fail") handle?.fail(failure.reason, at);
  else handle?.unknown(failure.reason, at);
}
