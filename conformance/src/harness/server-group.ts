import type { ServerKind } from "./backend-kind.js";
import { logTail } from "./log-tail.js";
import { DEFAULT_STOP_GRACE_MS, ManagedProcess, type ProcessSpec } from "./managed-process.js";
import { waitForReady } from "./wait-for-ready.js";

/** How to run one member of a server group; fixed for the group's lifetime. */
export interface MemberDefinition {
  /** Member name, e.g. `"e2"` or `"zk3"`. */
  readonly name: string;
  /** `host:port` clients connect to. */
  readonly address: string;
  /** Every port the member listens on, by role (e.g. `client`, `peer`). */
  readonly ports: Readonly<Record<string, number>>;
  /** The member's data directory (kept across restarts). */
  readonly dataDir: string;
  /** The process to run. */
  readonly spec: ProcessSpec;
  /** Resolves true when this member serves (as part of a quorum, for clusters). */
  readonly isReady: () => Promise<boolean>;
  /**
   * Resolves true when this member leads its cluster. Leaders are stopped
   * after the other members: an etcd leader that gets SIGTERM while its
   * followers are alive may spend seconds trying to hand over leadership.
   */
  readonly isLeader?: () => Promise<boolean>;
  /**
   * Called before the member gets its polite stop signal, with the number of
   * other members still running; lets a leader notice peers that just
   * stopped (see `etcdSettleBeforeStop`).
   */
  readonly settleBeforeStop?: (runningPeers: number) => Promise<void>;
}

/** One member of a running server group, as seen by tests. */
export interface ServerMember {
  /** Position in the group, from 0. */
  readonly index: number;
  /** Member name. */
  readonly name: string;
  /** `host:port` clients connect to. */
  readonly address: string;
  /** Every port it listens on, by role. */
  readonly ports: Readonly<Record<string, number>>;
  /** Its data directory. */
  readonly dataDir: string;
  /** Its log file (stdout and stderr). */
  readonly logFile: string;
  /** The PID of its current process, or `undefined` while it is down. */
  readonly pid: number | undefined;
  /** True while its process runs (also when paused). */
  readonly running: boolean;
  /** True while it is paused with SIGSTOP. */
  readonly paused: boolean;
}

/**
 * A running group of server processes (one Redis node, five Redlock nodes,
 * an etcd cluster, a ZooKeeper ensemble or one PostgreSQL server), with the
 * controls fault-injection tests need. Members are addressed by index.
 */
export interface ServerGroup {
  /** Which backend the group serves. */
  readonly kind: ServerKind;
  /** The connection URL handed to tests. */
  readonly url: string;
  /** Snapshot of the members. */
  readonly members: readonly ServerMember[];
  /** PIDs of the members currently running. */
  readonly pids: readonly number[];
  /** Stops every member by PID (SIGCONT, polite signal, SIGKILL after a grace period). */
  stop(): Promise<void>;
  /** Stops one member politely. */
  stopMember(member: number): Promise<void>;
  /** SIGKILLs one member and waits until it is gone. */
  kill(member: number): Promise<void>;
  /** Freezes one member with SIGSTOP (its whole process group). */
  pause(member: number): void;
  /** Thaws one member with SIGCONT. */
  resume(member: number): void;
  /**
   * Restarts one member with the same ports and data directory (stopping it
   * first if it runs) and waits until it serves again. Redis runs without
   * persistence, so a restarted Redis node starts empty; etcd, ZooKeeper and
   * PostgreSQL recover from their data dirs.
   */
  restart(member: number): Promise<void>;
  /** The last lines of a member's log. */
  logTail(member: number, lines?: number): string;
}

/** Options for {@link startServerGroup}. */
export interface StartServerGroupOptions {
  /** Which backend the group serves. */
  readonly kind: ServerKind;
  /** Names the group in messages, e.g. `"etcd cluster"`. */
  readonly what: string;
  /** The connection URL handed to tests. */
  readonly url: string;
  /** The members, in order. */
  readonly members: readonly MemberDefinition[];
  /** Time allowed to become ready. */
  readonly timeoutMs: number;
  /** Time between the polite stop signal and SIGKILL. */
  readonly graceMs?: number;
}

interface MemberState {
  readonly definition: MemberDefinition;
  process: ManagedProcess | undefined;
  paused: boolean;
}

class LocalServerGroup implements ServerGroup {
  readonly kind: ServerKind;
  readonly url: string;
  readonly #what: string;
  readonly #states: MemberState[];
  readonly #timeoutMs: number;
  readonly #graceMs: number;

  constructor(options: StartServerGroupOptions) {
    this.kind = options.kind;
    this.url = options.url;
    this.#what = options.what;
    this.#timeoutMs = options.timeoutMs;
    this.#graceMs = options.graceMs ?? DEFAULT_STOP_GRACE_MS;
    this.#states = options.members.map((definition) => ({
      definition,
      process: undefined,
      paused: false,
    }));
  }

  get members(): readonly ServerMember[] {
    return this.#states.map((state, index) => ({
      index,
      name: state.definition.name,
      address: state.definition.address,
      ports: state.definition.ports,
      dataDir: state.definition.dataDir,
      logFile: state.definition.spec.logFile,
      pid: state.process?.running ? state.process.pid : undefined,
      running: state.process?.running ?? false,
      paused: state.paused,
    }));
  }

  get pids(): readonly number[] {
    return this.#states.flatMap((state) => (state.process?.running ? [state.process.pid] : []));
  }

  #state(member: number): MemberState {
    const state = this.#states[member];
    if (state === undefined) {
      throw new RangeError(
        `${this.#what}: no member ${member} (members are 0..${this.#states.length - 1})`,
      );
    }
    return state;
  }

  #running(member: number): ManagedProcess {
    const state = this.#state(member);
    if (state.process === undefined || !state.process.running) {
      throw new Error(`${this.#what}: member ${member} (${state.definition.name}) is not running`);
    }
    return state.process;
  }

  /** Spawns every member and waits until all of them are ready. */
  async startAll(): Promise<void> {
    try {
      for (const state of this.#states) {
        state.process = await ManagedProcess.start(state.definition.spec);
      }
      const processes = this.#states.flatMap((state) => (state.process ? [state.process] : []));
      await waitForReady({
        what: this.#what,
        probe: async () => {
          const ready = await Promise.all(this.#states.map((state) => state.definition.isReady()));
          return ready.every(Boolean);
        },
        processes,
        timeoutMs: this.#timeoutMs,
      });
    } catch (error) {
      await this.stop().catch(() => undefined);
      throw error;
    }
  }

  async stop(): Promise<void> {
    const leaders = await Promise.all(
      this.#states.map(async (state) =>
        state.process?.running && !state.paused && state.definition.isLeader
          ? state.definition.isLeader().catch(() => false)
          : false,
      ),
    );
    const indexes = this.#states.map((_, index) => index);
    await Promise.all(
      indexes.filter((index) => !leaders[index]).map((index) => this.stopMember(index)),
    );
    await Promise.all(
      indexes.filter((index) => leaders[index]).map((index) => this.stopMember(index)),
    );
  }

  async stopMember(member: number): Promise<void> {
    const state = this.#state(member);
    if (state.process?.running) {
      if (state.definition.settleBeforeStop && !state.paused) {
        const runningPeers = this.#states.filter(
          (other) => other !== state && other.process?.running,
        ).length;
        await state.definition.settleBeforeStop(runningPeers).catch(() => undefined);
      }
      await state.process.stop(this.#graceMs);
    }
    state.paused = false;
  }

  async kill(member: number): Promise<void> {
    const state = this.#state(member);
    if (state.process?.running) {
      await state.process.kill();
    }
    state.paused = false;
  }

  pause(member: number): void {
    this.#running(member).pause();
    this.#state(member).paused = true;
  }

  resume(member: number): void {
    this.#running(member).resume();
    this.#state(member).paused = false;
  }

  async restart(member: number): Promise<void> {
    const state = this.#state(member);
    await this.stopMember(member);
    const process = await ManagedProcess.start(state.definition.spec);
    state.process = process;
    await waitForReady({
      what: `${this.#what} member ${state.definition.name}`,
      probe: () => state.definition.isReady(),
      processes: [process],
      timeoutMs: this.#timeoutMs,
    });
  }

  logTail(member: number, lines = 40): string {
    return logTail(this.#state(member).definition.spec.logFile, lines);
  }
}

/**
 * Starts a group of server processes and waits until every member is ready.
 * On failure every started member is stopped again before the error
 * (which carries the log tails) is thrown.
 */
export async function startServerGroup(options: StartServerGroupOptions): Promise<ServerGroup> {
  const group = new LocalServerGroup(options);
  await group.startAll();
  return group;
}
