import type { Holder } from "../contract/backend.js";
import {
  ConfigError,
  CoordinatorClosedError,
  type LockLostReason,
  LockTimeoutError,
} from "../contract/errors.js";
import { type BackoffOptions, backoffMs } from "../helpers/backoff.js";
import { type Clock, sleep } from "../helpers/clock.js";
import { reportError } from "../helpers/report-error.js";
import {
  checkFunction,
  checkName,
  checkOptions,
  checkString,
  LIMITS,
} from "../helpers/validate.js";
import { grantToken, type Lock, type RecipeHost } from "../kernel/index.js";
import { markElection } from "./election-marker.js";

declare module "../kernel/events.js" {
  interface CoordinatorEvents {
    /** This instance started campaigning in election `name`. */
    campaignStarted: { name: string };
    /** This instance became leader of election `name` for `term`. */
    elected: { name: string; term: bigint };
    /** This instance's term of election `name` ended. */
    revoked: { name: string; term: bigint; reason: string };
  }
}

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

const ELECTION_KEYS = ["value", "onElected", "onRevoked", "onError"] as const;
/** How long one campaign round waits in the queue before asking again. */
const CAMPAIGN_WAIT_MS = 3_600_000;
/** The pause before campaigning again after a failed round. */
const CAMPAIGN_RETRY: BackoffOptions = { minMs: 100, maxMs: 5_000 };

/**
 * Starts campaigning for leadership of `name` (see `Coordinator.elect`). Throws
 * `ConfigError` for bad input and `CoordinatorClosedError` after `close()`.
 */
export function elect(host: RecipeHost, name: string, options: ElectionOptions): Election {
  checkName(name);
  const resolved = resolveElectionOptions(options);
  host.assertOpen();
  return new CampaignLoop(host, name, resolved);
}

/** Checks `elect()` options; throws `ConfigError` naming the field. */
export function resolveElectionOptions(input: unknown): ElectionOptions {
  const o = checkOptions(input, "options", ELECTION_KEYS);
  checkFunction(o.onElected, "onElected");
  for (const key of ["onRevoked", "onError"] as const) {
    if (o[key] !== undefined) checkFunction(o[key], key);
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
  readonly #host: RecipeHost;
  readonly #options: ElectionOptions;
  readonly #clock: Clock;
  readonly #stop = new AbortController();
  readonly #done: Promise<void>;
  readonly #untrack: () => void;
  #lock: Lock | undefined;
  #resigning: (() => void) | undefined;
  #closed = false;

  constructor(host: RecipeHost, name: string, options: ElectionOptions) {
    this.name = name;
    this.#host = host;
    this.#options = options;
    this.#clock = host.clock;
    this.#untrack = host.track(() => this.close());
    this.#done = this.#run();
    host.events.emit("campaignStarted", { name });
    markElection(host, name);
  }

  get isLeader(): boolean {
    return this.#lock?.held === true;
  }

  get term(): bigint | undefined {
    const lock = this.#lock;
    return this.isLeader && lock !== undefined ? grantToken(lock) : undefined;
  }

  async leader(): Promise<Leader | null> {
    return leaderOf(await this.#host.locks.holder(this.name));
  }

  async *observe(options?: { signal?: AbortSignal }): AsyncGenerator<Leader | null> {
    let last: Leader | null | undefined;
    for await (const holder of this.#host.locks.watch(this.name, options)) {
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
      this.#untrack();
    }
  }

  /** One campaign round: the lock, or undefined after a failure (already reported). */
  async #campaign(failures: number): Promise<Lock | undefined> {
    const stop = this.#stop.signal;
    try {
      if (failures > 0) await sleep(this.#clock, backoffMs(failures, CAMPAIGN_RETRY), stop);
      const value = this.#options.value;
      return await this.#host.locks.acquire(this.name, {
        waitMs: CAMPAIGN_WAIT_MS,
        signal: stop,
        // A term is held, and a follower waits, for as long as it takes: no long-hold warnings.
        warnHeldMs: 0,
        warnWaitMs: 0,
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
    this.#host.events.emit("elected", { name: this.name, term });
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
    this.#host.events.emit("revoked", { name: this.name, term, reason });
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
    const locks = this.#host.locks;
    const until = this.#clock.now() + locks.ttlMs;
    while (!this.#closed && this.#clock.now() < until) {
      const holder = await locks.holder(this.name).catch(() => null);
      if (holder !== null && holder.ownerId !== locks.ownerId) return;
      await sleep(this.#clock, RECAMPAIGN_POLL_MS, this.#stop.signal).catch(() => undefined);
    }
  }

  #error(error: unknown, during: string): void {
    reportError(
      this.#options.onError,
      (e, during) => this.#host.report(e, during),
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
