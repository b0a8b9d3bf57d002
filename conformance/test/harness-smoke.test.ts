import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Etcd3 } from "etcd3";
import { Redis } from "ioredis";
import { CreateMode, createClient, type Client as ZookeeperClient } from "node-zookeeper-client";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  ALL_BACKENDS,
  type BatonServers,
  checkIdentity,
  countResults,
  DEFAULT_BACKENDS,
  decideBackend,
  describeBackend,
  etcdHealthy,
  etcdIsLeader,
  formatSummaryLine,
  freePorts,
  listTables,
  ManagedProcess,
  parseBackendList,
  readProcessState,
  readStartTime,
  redisPing,
  type StartedServers,
  selectedBackends,
  selectedProvider,
  signalIfSame,
  startServers,
} from "../src/harness/index.js";

/** Splits `scheme://h1:p1,h2:p2` into its `host:port` items. */
function addresses(url: string): string[] {
  return url.replace(/^[a-z]+:\/\//, "").split(",");
}

/** True while a process with this PID exists (zombies count as gone). */
function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  return checkIdentity({ pid, programs: [] }).status !== "gone";
}

function zkCall<T>(run: (callback: (error: unknown, value: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => {
    run((error, value) => (error ? reject(error) : resolve(value)));
  });
}

describe("harness", () => {
  it("provides batonServers with the selected backends", () => {
    const servers = inject("batonServers");
    expect(servers.selected).toEqual(selectedBackends());
    expect(servers.provider).toBe(selectedProvider());
  });
});

describeBackend("redis", (url) => {
  let redis: Redis;

  beforeAll(async () => {
    redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await redis.connect();
  });

  afterAll(async () => {
    await redis?.quit();
  });

  it("serves SET/GET on a single node", async () => {
    expect(url).toMatch(/^redis:\/\/127\.0\.0\.1:\d+$/);
    await redis.set("baton:smoke", "hello", "PX", 10_000);
    expect(await redis.get("baton:smoke")).toBe("hello");
  });
});

describeBackend("redlock", (url) => {
  const nodes: Redis[] = [];

  beforeAll(async () => {
    for (const address of addresses(url)) {
      const [host, port] = address.split(":");
      const node = new Redis({
        host: host ?? "",
        port: Number(port),
        lazyConnect: true,
        maxRetriesPerRequest: 1,
      });
      nodes.push(node);
      await node.connect();
    }
  });

  afterAll(async () => {
    await Promise.all(nodes.map((node) => node.quit()));
  });

  it("runs five independent nodes that each serve SET/GET", async () => {
    expect(url).toMatch(/^redlock:\/\/(127\.0\.0\.1:\d+,){4}127\.0\.0\.1:\d+$/);
    expect(new Set(addresses(url)).size).toBe(5);
    await Promise.all(nodes.map((node, index) => node.set("baton:node", `n${index}`)));
    // Independent: every node keeps its own value.
    expect(await Promise.all(nodes.map((node) => node.get("baton:node")))).toEqual([
      "n0",
      "n1",
      "n2",
      "n3",
      "n4",
    ]);
  });
});

describeBackend("etcd", (url) => {
  let client: Etcd3;

  beforeAll(() => {
    client = new Etcd3({ hosts: addresses(url).map((address) => `http://${address}`) });
  });

  afterAll(() => {
    client?.close();
  });

  it("serves put/get on a 3-member cluster", async () => {
    expect(url).toMatch(/^etcd:\/\/(127\.0\.0\.1:\d+,){2}127\.0\.0\.1:\d+$/);
    await client.put("baton/smoke").value("hello");
    expect(await client.get("baton/smoke").string()).toBe("hello");
    const { members } = await client.cluster.memberList({});
    expect(members).toHaveLength(3);
    expect(members.map((member) => member.name).sort()).toEqual(["e1", "e2", "e3"]);
  });
});

describeBackend("zookeeper", (url) => {
  let client: ZookeeperClient;

  beforeAll(async () => {
    client = createClient(addresses(url).join(","), { sessionTimeout: 4000, retries: 0 });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("zookeeper: no connection in 10 s")), 10_000);
      client.once("connected", () => {
        clearTimeout(timer);
        resolve();
      });
      client.connect();
    });
  });

  afterAll(() => {
    client?.close();
  });

  it("creates an ephemeral node and reads its data and czxid on a 3-node ensemble", async () => {
    expect(url).toMatch(/^zookeeper:\/\/(127\.0\.0\.1:\d+,){2}127\.0\.0\.1:\d+$/);
    const path = `/baton-smoke-${process.pid}`;
    const created = await zkCall<string>((cb) =>
      client.create(path, Buffer.from("hello"), CreateMode.EPHEMERAL, cb),
    );
    expect(created).toBe(path);
    const data = await zkCall<Buffer>((cb) => client.getData(path, cb));
    expect(data.toString()).toBe("hello");
    const stat = await new Promise<{ czxid: Buffer; ephemeralOwner: Buffer }>((resolve, reject) =>
      client.exists(path, (error, value) => (error ? reject(error) : resolve(value))),
    );
    expect(stat).toBeTruthy();
    expect(stat.czxid.readBigInt64BE(0)).toBeGreaterThan(0n);
    expect(stat.ephemeralOwner.readBigInt64BE(0)).not.toBe(0n);
  });
});

describeBackend("postgres", (url) => {
  let client: pg.Client;

  beforeAll(async () => {
    client = new pg.Client({ connectionString: url });
    await client.connect();
  });

  afterAll(async () => {
    await client?.end();
  });

  it("answers select 1 and reports its version", async () => {
    expect(url).toMatch(/^postgres:\/\/postgres@127\.0\.0\.1:\d+\/postgres$/);
    const one = await client.query<{ one: number }>("select 1 as one");
    expect(one.rows[0]?.one).toBe(1);
    const version = await client.query<{ server_version: string }>("show server_version");
    expect(version.rows[0]?.server_version).toMatch(/^\d+/);
  });
});

describeBackend("dynamodb", (url) => {
  it("serves dynalite on loopback: ListTables answers, a closed port does not", async () => {
    const match = /^dynamodb:\/\/local:local-secret@127\.0\.0\.1:(\d+)\/baton-locks\?/.exec(url);
    expect(match, url).not.toBeNull();
    expect(await listTables("127.0.0.1", Number(match?.[1]))).toBe(true);
    const [closed] = await freePorts(1, "127.0.0.1");
    expect(await listTables("127.0.0.1", closed as number)).toBe(false);
  });
});

describe("harness: backend selection", () => {
  it("selects the default backends when none is named, and any known one when named", () => {
    expect(parseBackendList(undefined)).toEqual([...DEFAULT_BACKENDS]);
    expect(parseBackendList("  ")).toEqual([...DEFAULT_BACKENDS]);
    expect(selectedBackends({})).toEqual([...DEFAULT_BACKENDS]);
    expect(parseBackendList(ALL_BACKENDS.join(","))).toEqual([...ALL_BACKENDS]);
  });

  it("parses a list, ignoring case, spaces and duplicates", () => {
    expect(parseBackendList(" Etcd, redis ,redis")).toEqual(["redis", "etcd"]);
  });

  it("rejects an unknown name and names the allowed values", () => {
    expect(() => selectedBackends({ BATON_BACKENDS: "redis,mongo" })).toThrow(
      /unknown backend "mongo".*allowed values: memory, redis, redlock, etcd, zookeeper, postgres/,
    );
    expect(() => parseBackendList(",")).toThrow(/names no backend/);
  });

  it("rejects an unknown provider", () => {
    expect(selectedProvider({})).toBe("local");
    expect(() => selectedProvider({ BATON_SERVER_PROVIDER: "docker" })).toThrow(
      /allowed values: local, testcontainers/,
    );
  });

  it("fails under CI=true, skips loudly locally, when a server is unavailable", () => {
    const servers: BatonServers = {
      selected: ["memory", "redis"],
      provider: "local",
      unavailable: { redis: "redis-server not found" },
    };
    expect(decideBackend("redis", servers, { CI: "true" })).toMatchObject({
      action: "fail",
      reason: expect.stringMatching(/redis-server not found/),
    });
    expect(decideBackend("redis", servers, {})).toMatchObject({ action: "skip", loud: true });
    expect(decideBackend("etcd", servers, { CI: "true" })).toMatchObject({
      action: "skip",
      loud: false,
    });
    expect(decideBackend("memory", servers, {})).toEqual({ action: "run", url: "memory:" });
    expect(decideBackend("redis", undefined, {})).toMatchObject({ action: "fail" });
  });

  it("prints the summary line CI reads", () => {
    expect(formatSummaryLine({ passed: 3, failed: 1, skipped: 2 })).toBe(
      "Tests: 3 passed, 1 failed, 2 skipped",
    );
    expect(countResults([])).toEqual({ passed: 0, failed: 0, skipped: 0 });
    expect(countResults([], [], "failed")).toEqual({ passed: 0, failed: 1, skipped: 0 });
  });
});

describe("harness: PID identity", () => {
  let dir: string;
  let sleeper: ManagedProcess;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "baton-identity-"));
    sleeper = await ManagedProcess.start({
      name: "sleeper",
      command: "/bin/sleep",
      args: ["60"],
      logFile: join(dir, "sleep.log"),
    });
  });

  afterAll(async () => {
    await sleeper?.stop(1000);
    await rm(dir, { recursive: true, force: true });
  });

  it("refuses to signal a PID whose cmdline names another program", () => {
    const pid = sleeper.pid;
    const startTime = readStartTime(pid);
    expect(checkIdentity(sleeper.identity)).toEqual({ status: "same" });
    const other = { pid, programs: ["redis-server"], startTime };
    expect(checkIdentity(other)).toMatchObject({ status: "mismatch" });
    expect(signalIfSame(other, "SIGKILL")).toBe("mismatch");
    expect(processExists(pid)).toBe(true);
  });

  it("refuses to signal a PID that was reused (different start time)", () => {
    const reused = { pid: sleeper.pid, programs: ["sleep"], startTime: "1" };
    expect(signalIfSame(reused, "SIGKILL")).toBe("mismatch");
    expect(processExists(sleeper.pid)).toBe(true);
  });

  it("reports a PID that no longer exists as gone", () => {
    expect(checkIdentity({ pid: 2 ** 22 + 1, programs: ["sleep"] })).toEqual({ status: "gone" });
  });
});

describeBackend("redis", () => {
  let started: StartedServers;
  const imported: string[] = [];

  beforeAll(async () => {
    started = await startServers({
      backends: ["redis"],
      provider: "local",
      importModule: async (name) => {
        imported.push(name);
        throw new Error("the local provider must not import anything");
      },
    });
  });

  afterAll(async () => {
    await started?.stop();
  });

  it("starts a private server without importing testcontainers", () => {
    expect(imported).toEqual([]);
    expect(started.groups.redis?.pids).toHaveLength(1);
  });

  it("restarts a member on the same port", async () => {
    const group = started.groups.redis;
    if (!group) throw new Error("no redis group");
    const [before] = group.pids;
    const port = group.members[0]?.ports.client ?? 0;
    await group.kill(0);
    expect(group.pids).toEqual([]);
    expect(await redisPing("127.0.0.1", port)).toBe(false);
    await group.restart(0);
    expect(group.pids).toHaveLength(1);
    expect(group.pids[0]).not.toBe(before);
    expect(await redisPing("127.0.0.1", port)).toBe(true);
  });

  it("stops a paused (SIGSTOP) server by its PID", async () => {
    const group = started.groups.redis;
    if (!group) throw new Error("no redis group");
    const [pid] = group.pids;
    if (pid === undefined) throw new Error("no pid");
    group.pause(0);
    expect(readProcessState(pid)).toBe("T");
    expect(await redisPing("127.0.0.1", group.members[0]?.ports.client ?? 0, 300)).toBe(false);
    const t0 = performance.now();
    await group.stop();
    expect(performance.now() - t0).toBeLessThan(5000);
    expect(processExists(pid)).toBe(false);
    expect(group.pids).toEqual([]);
  });

  it("removes the temp dir after a clean stop", async () => {
    const { existsSync } = await import("node:fs");
    const dir = started.workDir;
    expect(dir && existsSync(dir)).toBe(true);
    expect(await started.stop()).toEqual({ keptWorkDir: undefined });
    expect(dir && existsSync(dir)).toBe(false);
  });
});

describeBackend("etcd", () => {
  let started: StartedServers;

  beforeAll(async () => {
    started = await startServers({ backends: ["etcd"], provider: "local" });
  });

  afterAll(async () => {
    await started?.stop();
  });

  it("keeps serving with a follower killed, and restarts it with its ports and data", async () => {
    const group = started.groups.etcd;
    if (!group) throw new Error("no etcd group");
    expect(group.pids).toHaveLength(3);
    // Kill a follower: with the leader killed, etcd itself needs an election
    // and may hold the next write for its 7 s request timeout.
    const leaders = await Promise.all(
      group.members.map((member) => etcdIsLeader("127.0.0.1", member.ports.client ?? 0)),
    );
    const leader = leaders.indexOf(true);
    expect(leader).toBeGreaterThanOrEqual(0);
    const victim = (leader + 1) % 3;
    const member = group.members[victim];
    if (!member) throw new Error(`no member ${victim}`);
    const client = new Etcd3({ hosts: `http://${group.members[leader]?.address}` });
    try {
      await group.kill(victim);
      expect(group.pids).toHaveLength(2);
      expect(group.members[victim]?.running).toBe(false);
      await client.put("baton/fault").value("still-there");
      await group.restart(victim);
      expect(group.members[victim]?.ports).toEqual(member.ports);
      expect(group.pids).toHaveLength(3);
      expect(await etcdHealthy("127.0.0.1", member.ports.client ?? 0)).toBe(true);
    } finally {
      client.close();
    }
    const direct = new Etcd3({ hosts: `http://${member.address}` });
    try {
      expect(await direct.get("baton/fault").string()).toBe("still-there");
    } finally {
      direct.close();
    }
  });
});

describe("harness: testcontainers provider", () => {
  it("fails clearly when the testcontainers package is not installed", async () => {
    await expect(startServers({ backends: ["redis"], provider: "testcontainers" })).rejects.toThrow(
      /the "testcontainers" package is not installed/,
    );
  });

  it("fails clearly when no container engine is reachable", async () => {
    const fake = {
      GenericContainer: class {},
      Network: class {},
      Wait: {},
      getContainerRuntimeClient: async () => {
        throw new Error("Could not find a working container runtime strategy");
      },
    };
    await expect(
      startServers({
        backends: ["redis"],
        provider: "testcontainers",
        importModule: async () => fake,
      }),
    ).rejects.toThrow(/no Docker \(or compatible\) container engine is reachable/);
  });
});
