import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { addExitCleanup, findOnPath } from "@baton/conformance/harness";

/** The foreign ZooKeeper client library a worker process runs. */
export type InteropLibrary = "curator" | "kazoo";

/**
 * The recipe a worker contends with: Curator's `InterProcessMutex` ("lock"), `LeaderLatch`
 * ("latch") and `LeaderSelector` ("selector"); kazoo's `Lock` ("lock") and `Election`
 * ("election").
 */
export type InteropRecipe = "lock" | "latch" | "selector" | "election";

/** Options of {@link spawnInteropWorker}. */
export interface InteropWorkerOptions {
  readonly library: InteropLibrary;
  readonly recipe: InteropRecipe;
  /** ZooKeeper connect string, `host:port,host:port`. */
  readonly connect: string;
  /** The ZooKeeper path the recipe contends on (a Baton lock's parent node, say). */
  readonly path: string;
  /** The worker's name: kazoo's identifier and LeaderSelector's id; in error messages. */
  readonly id: string;
  /**
   * The session timeout the client asks for (default 20 s: a process stalled on a busy machine
   * keeps its session; ask for a short one to see a killed worker's session expire).
   */
  readonly sessionTimeoutMs?: number;
  /**
   * kazoo's `Lock(extra_lock_patterns=...)`: other libraries' node markers kazoo waits for.
   * For kazoo's Lock the default is `["-lock-"]` (Curator's and Baton's nodes); `[]` is
   * kazoo's own default. kazoo's `Election` takes no patterns: the default is `[]`, and with
   * patterns its lock is replaced by a `Lock` that has them.
   */
  readonly extraLockPatterns?: readonly string[];
  /** How long to wait for the worker's `ready` (default 60 s: a JVM on a busy machine). */
  readonly readyTimeoutMs?: number;
}

/**
 * Where and how one acquire contends, when not on the worker's own path with its own recipe:
 * Curator workers only (one JVM serves every Curator step of a test file).
 */
export interface InteropTarget {
  /** The path to contend on (one recipe object per path and recipe). */
  readonly path?: string;
  /** The recipe to contend with. */
  readonly recipe?: InteropRecipe;
}

/** A hold a worker reported: its node, that node's czxid, when its line arrived. */
export interface InteropHold {
  /** The node name the recipe holds (under `path`). */
  readonly node: string;
  /** The node's creation zxid: the fencing token Baton would have given that node. */
  readonly token: bigint;
  /** `performance.now()` when the `acquired` line arrived. */
  readonly at: number;
}

/** A running worker process; see {@link spawnInteropWorker}. */
export interface InteropWorker {
  readonly library: InteropLibrary;
  readonly recipe: InteropRecipe;
  readonly id: string;
  readonly pid: number;
  /** How long the process took from spawn to `ready` (ms). */
  readonly startMs: number;
  /** The node of the current or last attempt, once the library exposes it. */
  readonly node: string | undefined;
  /**
   * Resolves with the node name once the recipe has created its node (kazoo says so before
   * it waits; Curator's recipes expose their node only once they hold).
   */
  queued(timeoutMs?: number): Promise<string>;
  /**
   * Asks for the lock or leadership and resolves once held; rejects with
   * {@link InteropTimeoutError} when `timeoutMs` (default 30 s) runs out first (the worker
   * then gives up its attempt, as the library does on its own timeout). `target` (Curator
   * workers only) contends on another path or with another recipe than the worker's own:
   * one process serves several locks and elections, one at a time.
   */
  acquire(timeoutMs?: number, target?: InteropTarget): Promise<InteropHold>;
  /** Gives the lock or leadership up; resolves (with the time) once its node is deleted. */
  release(): Promise<number>;
  /** SIGKILLs the process: its session stays until ZooKeeper expires it. */
  kill(): Promise<void>;
  /** Closes the session (deleting its ephemeral nodes) and ends the process. */
  stop(): Promise<void>;
}

/** An acquire whose timeout ran out in the worker before the recipe held. */
export class InteropTimeoutError extends Error {
  constructor(worker: string, timeoutMs: number) {
    super(`${worker}: not acquired within ${timeoutMs} ms`);
    this.name = "InteropTimeoutError";
  }
}

const JAVA_DIR = "/usr/share/java";
const PYTHON = "/usr/bin/python3";
const KAZOO = "/usr/lib/python3/dist-packages/kazoo/__init__.py";
const INSTALL = "bash scripts/install-servers.sh zookeeper";
const here = dirname(fileURLToPath(import.meta.url));

/**
 * Curator's classpath: curator-recipes.jar names the rest (curator-framework, -client,
 * ZooKeeper, Guava, SLF4J) in its manifest; slf4j-nop silences SLF4J's missing-binding note.
 */
function curatorCommand(): { command: string; args: string[] } {
  const java = findOnPath("java");
  if (java === undefined) {
    throw new Error(`Curator workers need java (Java 17 or later) on PATH: run ${INSTALL}`);
  }
  const recipes = join(JAVA_DIR, "curator-recipes.jar");
  if (!existsSync(recipes)) {
    throw new Error(
      `Curator workers need ${recipes} (Debian's libcurator-recipes-java): run ${INSTALL}`,
    );
  }
  const classpath = [recipes];
  const nop = join(JAVA_DIR, "slf4j-nop.jar");
  if (existsSync(nop)) classpath.push(nop);
  return {
    command: java,
    args: [
      "-XX:+UseSerialGC",
      "-XX:TieredStopAtLevel=1",
      "-cp",
      classpath.join(":"),
      join(here, "CuratorWorker.java"),
    ],
  };
}

function kazooCommand(): { command: string; args: string[] } {
  if (!existsSync(PYTHON)) {
    throw new Error(`kazoo workers need ${PYTHON} (Debian's python3): run ${INSTALL}`);
  }
  if (!existsSync(KAZOO)) {
    throw new Error(
      `kazoo workers need kazoo for ${PYTHON} (Debian's python3-kazoo): run ${INSTALL}`,
    );
  }
  return { command: PYTHON, args: ["-u", join(here, "kazoo_worker.py")] };
}

function checkRecipe(library: InteropLibrary, recipe: InteropRecipe): void {
  const recipes: Record<InteropLibrary, readonly InteropRecipe[]> = {
    curator: ["lock", "latch", "selector"],
    kazoo: ["lock", "election"],
  };
  if (!recipes[library].includes(recipe)) {
    throw new Error(`${library} workers run ${recipes[library].join(", ")}, not "${recipe}"`);
  }
}

type Waiter = {
  readonly accept: (words: readonly string[], at: number) => boolean;
  readonly reject: (error: Error) => void;
};

/**
 * Starts a Java (Curator) or Python (kazoo) process contending for `path` with the given
 * recipe, and resolves once it is connected (`ready`). It speaks lines on stdin/stdout: in
 * `acquire <timeout ms> [path [recipe]]` (Curator only), `release`, `stop`; out
 * `ready`, `queued <node>`, `acquired <node> <czxid>`, `timeout`, `released`, `stopped`,
 * `error <message>`. A worker whose stdin closes exits, so workers die with the test
 * process; any left at exit are SIGKILLed.
 *
 * Rejects naming the package to install when java, Curator's jars, /usr/bin/python3 or
 * kazoo are missing.
 */
export async function spawnInteropWorker(options: InteropWorkerOptions): Promise<InteropWorker> {
  checkRecipe(options.library, options.recipe);
  const { command, args } = options.library === "curator" ? curatorCommand() : kazooCommand();
  const sessionTimeoutMs = options.sessionTimeoutMs ?? 20_000;
  const workerArgs = [
    options.connect,
    options.path,
    options.id,
    options.recipe,
    String(sessionTimeoutMs),
  ];
  if (options.library === "kazoo")
    workerArgs.push(
      (options.extraLockPatterns ?? (options.recipe === "lock" ? ["-lock-"] : [])).join(","),
    );
  const name = `${options.library} ${options.recipe} worker "${options.id}"`;
  const spawnedAt = performance.now();
  const child: ChildProcessWithoutNullStreams = spawn(command, [...args, ...workerArgs], {
    stdio: ["pipe", "pipe", "pipe"],
  });
  const pid = child.pid;
  const unregister = addExitCleanup("kill", () => {
    child.kill("SIGKILL");
  });
  const stderr: string[] = [];
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (chunk: string) => {
    stderr.push(chunk);
    if (stderr.length > 50) stderr.shift();
  });
  // A write to a worker that has died must not crash the test process.
  child.stdin.on("error", () => undefined);
  const waiters: Waiter[] = [];
  let exitError: Error | undefined;
  let node: string | undefined;
  const errorText = (message: string) => {
    const tail = stderr.join("").trim().split("\n").slice(-10).join("\n");
    return tail === "" ? `${name}: ${message}` : `${name}: ${message}\n${tail}`;
  };
  const failAll = (error: Error) => {
    for (const w of waiters.splice(0)) w.reject(error);
  };
  const exited = new Promise<void>((resolve) => {
    child.once("exit", (code, signal) => {
      unregister();
      exitError = new Error(errorText(`exited (${signal ?? `code ${code}`})`));
      failAll(exitError);
      resolve();
    });
  });
  child.once("error", (error) => {
    exitError = new Error(errorText(`could not run ${command}: ${error.message}`));
    failAll(exitError);
  });
  createInterface({ input: child.stdout }).on("line", (line) => {
    const at = performance.now();
    const words = line.trim().split(" ");
    if (words[0] === "queued" || words[0] === "acquired") node = words[1];
    if (words[0] === "error") {
      failAll(new Error(errorText(line.slice("error ".length))));
      return;
    }
    const index = waiters.findIndex((w) => w.accept(words, at));
    if (index >= 0) waiters.splice(index, 1);
  });

  /** Waits for the next line whose first word is one of `expected`. */
  const next = <T>(
    expected: readonly string[],
    timeoutMs: number,
    what: string,
    onLine: (words: readonly string[], at: number) => T,
  ): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      if (exitError !== undefined) {
        reject(exitError);
        return;
      }
      const timer = setTimeout(() => {
        const i = waiters.indexOf(waiter);
        if (i >= 0) waiters.splice(i, 1);
        reject(new Error(errorText(`no ${what} within ${timeoutMs} ms`)));
      }, timeoutMs);
      const waiter: Waiter = {
        accept: (words, at) => {
          if (!expected.includes(words[0] as string)) return false;
          clearTimeout(timer);
          try {
            resolve(onLine(words, at));
          } catch (error) {
            reject(error as Error);
          }
          return true;
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      };
      waiters.push(waiter);
    });
  const send = (line: string) => {
    if (exitError !== undefined) throw exitError;
    child.stdin.write(`${line}\n`);
  };

  await next(["ready"], options.readyTimeoutMs ?? 60_000, "ready", () => undefined).catch(
    (error) => {
      child.kill("SIGKILL");
      throw error;
    },
  );
  const startMs = performance.now() - spawnedAt;

  return {
    library: options.library,
    recipe: options.recipe,
    id: options.id,
    pid: pid as number,
    startMs,
    get node() {
      return node;
    },
    queued(timeoutMs = 30_000) {
      if (node !== undefined) return Promise.resolve(node);
      return next(["queued", "acquired"], timeoutMs, "queued node", (words) => words[1] as string);
    },
    acquire(timeoutMs = 30_000, target: InteropTarget = {}) {
      const path = target.path ?? options.path;
      const recipe = target.recipe ?? options.recipe;
      const other = path !== options.path || recipe !== options.recipe;
      if (other) {
        try {
          if (options.library !== "curator")
            throw new Error("only Curator workers take another path or recipe");
          checkRecipe(options.library, recipe);
          if (!/^\/\S*$/.test(path)) throw new Error(`not a ZooKeeper path: "${path}"`);
        } catch (error) {
          return Promise.reject(new Error(`${name}: ${(error as Error).message}`));
        }
      }
      node = undefined;
      // The worker's own timeout answers first; ours only catches a worker that went silent.
      const reply = next(
        ["acquired", "timeout"],
        timeoutMs + 30_000,
        "reply to acquire",
        (words, at) => {
          if (words[0] === "timeout") throw new InteropTimeoutError(name, timeoutMs);
          return { node: words[1] as string, token: BigInt(words[2] as string), at };
        },
      );
      send(other ? `acquire ${timeoutMs} ${path} ${recipe}` : `acquire ${timeoutMs}`);
      return reply;
    },
    release() {
      const reply = next(["released"], 30_000, "reply to release", (_, at) => at);
      send("release");
      return reply;
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      try {
        child.stdin.end("stop\n");
        await exited;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
