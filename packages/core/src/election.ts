import type { Holder } from "./backend.js";
import { type Clock, sleep, systemClock } from "./clock.js";
import type { Coordinator } from "./coordinator.js";
import {
  ConfigError,
  CoordinatorClosedError,
  type LockLostReason,
  LockTimeoutError,
} from "./errors.js";
import { grantToken, type Lock } from "./lock.js";
import { reportError } from "./report-error.js";
import { checkOptions, checkString, LIMITS } from "./validate.js";

/** The leader as everyone sees it. */
export interface Leader {
  /** The leader's coordinator owner id. */
  readonly ownerId: string;
  /** The value the leader published (e.g. its address). */
  readonly value: string | undefined;
  /** The term: the fencing token of the leader's grant; a later term is greater. */
  readonly term: bigint;
}

/** What `onElected` receives, once per term. */
export interface TermContext {
  /** Aborts when this term ends for any reason (lost, resigned, closed, step-down). */
  readonly signal: AbortSignal;
  /** The term number (the grant's fencing token). */
  readonly term: bigint;
  /** The fencing token to send with the leader's writes (equal to `term`). */
  readonly token: bigint;
}

/** Why a term ended. */
export type RevokedReason = LockLostReason | "resigned" | "failed";

/** Options of `coordinator.elect()`. */
export interface ElectionOptions {
  /** Published while leading (shown by `leader()` and `observe()`), e.g. `"10.0.0.7:8080"`. */
  readonly value?: string;
  /**
   * Runs once at the start of each term. It may return at once (and start work tied to
   * `signal`) or run until `signal` aborts. If it throws, the instance steps down
   * (reason `failed`), reports the error, and campaigns again.
   */
  readonly onElected: (context: TermContext) => void | Promise<void>;
  /** Runs once when a term that started ends; the next campaign waits for it. */
  readonly onRevoked?: (info: { term: bigint; reason: RevokedReason }) => void | Promise<void>;
  /** Errors of callbacks and of campaigning (default: the coordinator's `backgroundError` event). */
  readonly onError?: (error: unknown) => void;
}

/** A campaign for leadership of one name; see `coordinator.elect()`. */
export interface Election extends AsyncDisposable {
  /** The election name (a lock name). */
  readonly name: string;
  /** True while this instance leads (checks the local deadline on the spot). */
  readonly isLeader: boolean;
  /** This instance's current term, while it leads. */
  readonly term: bigint | undefined;
  /** The current leader as the store sees it, or `null`. */
  leader(): Promise<Leader | null>;
  /** The leader now and after every change, pushed from the store's watch where it has one. */
  observe(options?: { signal?: AbortSignal }): AsyncIterable<Leader | null>;
  /** Gives up leadership (if held) so another instance takes over, then campaigns again. */
  resign(): Promise<void>;
  /** Stops campaigning and gives up leadership; no callback runs after it resolves. */
  close(): Promise<void>;
}

/** What an election needs from its coordinator beyond the public API. */
export interface ElectionHost {
  readonly coordinator: Coordinator;
  readonly clock: Clock | undefined;
  /** Reports an error no callback took. */
  readonly report: (error: unknown, during: string) => void;
  /** Called once the election is closed. */
  readonly closed: (election: Election) => void;
  /** Called when a term starts and ends (for events and metrics). */
  readonly termChanged: (change: { term: bigint; started: boolean; reason?: string }) => void;
}

const ELECTION_KEYS = ["value", "onElected", "onRevoked", "onError"] as const;
/** How long one campaign round waits in the queue before asking again. */
const CAMPAIGN_WAIT_MS = 3_600_000;

/** Checks `elect()` options; throws `ConfigError` naming the field. */
export function resolveElectionOptions(input: unknown): ElectionOptions {
  const o = checkOptions(input, "options", ELECTION_KEYS);
  if (typeof o.onElected !== "function") throw new ConfigError("onElected", "must be a function");
  for (const key of ["onRevoked", "onError"] as const) {
    if (o[key] !== undefined && typeof o[key] !== "function")
      throw new ConfigError(key, "must be a function");
  }
  if (o.value !== undefined) checkString(o.value, "value", LIMITS.valueMaxLength);
  return o as unknown as ElectionOptions;
}

/** Turns a lock holder into a leader. */
export function leaderOf(holder: Holder | null): Leader | null {
  return holder === null
    ? null
    : { ownerId: holder.ownerId, value: holder.value, term: holder.token };
}

/** @internal One election: a campaign loop over a lock. Built by `coordinator.elect()`. */
export class CampaignLoop implements Election {
  readonly name: string;
  readonly #host: ElectionHost;
  readonly #options: ElectionOptions;
  readonly #clock: Clock;
  readonly #stop = new AbortController();
  readonly #done: Promise<void>;
  #lock: Lock | undefined;
  #resigning: (() => void) | undefined;
  #closed = false;

  constructor(host: ElectionHost, name: string, options: ElectionOptions) {
    this.name = name;
    this.#host = host;
    this.#options = options;
    this.#clock = host.clock ?? systemClock;
    this.#done = this.#run();
  }

  get isLeader(): boolean {
    return this.#lock?.held === true;
  }

  get term(): bigint | undefined {
    const lock = this.#lock;
    return this.isLeader && lock !== undefined ? grantToken(lock) : undefined;
  }

  async leader(): Promise<Leader | null> {
    return leaderOf(await this.#host.coordinator.holder(this.name));
  }

  async *observe(options?: { signal?: AbortSignal }): AsyncGenerator<Leader | null> {
    let last: Leader | null | undefined;
    for await (const holder of this.#host.coordinator.watch(this.name, options)) {
      const leader = leaderOf(holder);
      if (last !== undefined && leader?.term === last?.term && leader?.ownerId === last?.ownerId)
        continue;
      last = leader;
      yield leader;
    }
  }

  async resign(): Promise<void> {
    const lock = this.#lock;
    if (lock === undefined || !lock.held) return;
    const revoked = new Promise<void>((resolve) => {
      this.#resigning = resolve;
    });
    await lock.release().catch((error: unknown) => this.#error(error, "resigning"));
    await revoked;
  }

  async close(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true;
      this.#stop.abort(new ConfigError("election", `election "${this.name}" is closed`));
      await this.#lock?.release().catch((error: unknown) => this.#error(error, "closing"));
    }
    await this.#done;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  async #run(): Promise<void> {
    try {
      for (let failures = 0; !this.#closed; ) {
        const lock = await this.#campaign(failures);
        if (lock === undefined) {
          failures++;
          continue;
        }
        failures = 0;
        await this.#serve(lock);
      }
    } finally {
      this.#host.closed(this);
    }
  }

  /** One campaign round: the lock, or undefined after a failure (already reported). */
  async #campaign(failures: number): Promise<Lock | undefined> {
    const stop = this.#stop.signal;
    try {
      if (failures > 0) await sleep(this.#clock, Math.min(5_000, 100 * 2 ** failures), stop);
      const value = this.#options.value;
      return await this.#host.coordinator.acquire(this.name, {
        waitMs: CAMPAIGN_WAIT_MS,
        signal: stop,
        ...(value !== undefined ? { value } : {}),
      });
    } catch (error) {
      if (stop.aborted) return undefined;
      if (error instanceof CoordinatorClosedError) {
        // The coordinator closed under us: so does the election.
        this.#closed = true;
        return undefined;
      }
      if (!(error instanceof LockTimeoutError)) this.#error(error, "campaigning");
      return undefined;
    }
  }

  /** One term: onElected once, hold until it ends, onRevoked once. */
  async #serve(lock: Lock): Promise<void> {
    if (this.#closed) {
      await lock.release().catch(() => undefined);
      return;
    }
    this.#lock = lock;
    const term = grantToken(lock);
    this.#host.termChanged({ term, started: true });
    let failed = false;
    try {
      await this.#options.onElected({
        signal: lock.signal,
        term,
        // Read from the lock: a backend without fencing has no token (see Lock.token).
        get token() {
          return lock.token;
        },
      });
    } catch (error) {
      failed = true;
      this.#error(error, "onElected");
      await lock
        .release()
        .catch((e: unknown) => this.#error(e, "stepping down after onElected failed"));
    }
    await aborted(lock.signal);
    this.#lock = undefined;
    await lock.release().catch(() => undefined); // a lost lock: frees its name locally, no I/O
    const resigned = this.#resigning;
    this.#resigning = undefined;
    const reason: RevokedReason = failed
      ? "failed"
      : resigned !== undefined
        ? "resigned"
        : this.#closed
          ? "closed"
          : (lock.lostReason ?? "released");
    this.#host.termChanged({ term, started: false, reason });
    try {
      await this.#options.onRevoked?.({ term, reason });
    } catch (error) {
      this.#error(error, "onRevoked");
    }
    resigned?.();
    // After giving up on purpose, let a waiting follower take over before campaigning again:
    // until someone else leads, or one TTL at most (on stores without FIFO, a resigned leader
    // that campaigned at once could win its own race).
    if ((resigned !== undefined || failed) && !this.#closed) await this.#letOthersLead();
  }

  async #letOthersLead(): Promise<void> {
    const coordinator = this.#host.coordinator;
    const until = this.#clock.now() + coordinator.ttlMs;
    while (!this.#closed && this.#clock.now() < until) {
      const holder = await coordinator.holder(this.name).catch(() => null);
      if (holder !== null && holder.ownerId !== coordinator.ownerId) return;
      await sleep(this.#clock, RECAMPAIGN_POLL_MS, this.#stop.signal).catch(() => undefined);
    }
  }

  #error(error: unknown, during: string): void {
    reportError(
      this.#options.onError,
      this.#host.report,
      error,
      `election "${this.name}": ${during}`,
    );
  }
}

/** How often a resigned leader looks for its successor before campaigning again. */
const RECAMPAIGN_POLL_MS = 50;

function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) =>
    signal.addEventListener("abort", () => resolve(), { once: true }),
  );
}
