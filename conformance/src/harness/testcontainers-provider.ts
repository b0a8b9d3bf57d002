import type { ServerKind } from "./backend-kind.js";
import { etcdHealthy } from "./etcd-health.js";
import { INSTALL_HINT } from "./server-binaries.js";
import { waitUntil } from "./wait-until.js";
import { zookeeperServing } from "./zookeeper-srvr.js";

/** The optional package behind `BATON_SERVER_PROVIDER=testcontainers`. */
export const TESTCONTAINERS_PACKAGE = "testcontainers";

/** Container images used by the testcontainers provider. */
export const CONTAINER_IMAGES = {
  redis: "redis:7.0",
  etcd: "quay.io/coreos/etcd:v3.5.17",
  zookeeper: "zookeeper:3.8",
  postgres: "postgres:15",
} as const;

/** A started container: the few members of testcontainers' API this provider uses. */
export interface StartedContainerLike {
  getHost(): string;
  getMappedPort(port: number): number;
  stop(): Promise<unknown>;
}

/** A container being configured (testcontainers' `GenericContainer`). */
export interface ContainerBuilderLike {
  withExposedPorts(...ports: number[]): ContainerBuilderLike;
  withCommand(command: string[]): ContainerBuilderLike;
  withEnvironment(environment: Record<string, string>): ContainerBuilderLike;
  withNetwork(network: StartedNetworkLike): ContainerBuilderLike;
  withNetworkAliases(...aliases: string[]): ContainerBuilderLike;
  withWaitStrategy(strategy: unknown): ContainerBuilderLike;
  withStartupTimeout(ms: number): ContainerBuilderLike;
  start(): Promise<StartedContainerLike>;
}

/** A started container network. */
export interface StartedNetworkLike {
  stop(): Promise<unknown>;
}

/** The parts of the `testcontainers` module this provider uses. */
export interface TestcontainersModule {
  GenericContainer: new (image: string) => ContainerBuilderLike;
  Network: new () => { start(): Promise<StartedNetworkLike> };
  Wait: {
    forLogMessage(message: string | RegExp, times?: number): unknown;
    forListeningPorts(): unknown;
  };
  getContainerRuntimeClient?: () => Promise<unknown>;
}

/** Imports a module by name; replaceable in tests. */
export type ModuleImporter = (name: string) => Promise<unknown>;

const defaultImporter: ModuleImporter = (name) => import(/* @vite-ignore */ name);

function isModuleNotFound(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as NodeJS.ErrnoException).code;
  return (
    code === "ERR_MODULE_NOT_FOUND" ||
    code === "MODULE_NOT_FOUND" ||
    /cannot find (package|module)|failed to (load|resolve)/i.test(error.message)
  );
}

function causeText(error: unknown): string {
  return error instanceof Error ? (error.message.split("\n")[0] ?? "") : String(error);
}

/**
 * Loads the optional `testcontainers` package (never a dependency of Baton;
 * only this provider imports it, and only when selected).
 *
 * @param importModule - the importer; tests pass a fake
 * @throws Error saying the package is missing or cannot be imported here
 */
export async function loadTestcontainers(
  importModule: ModuleImporter = defaultImporter,
): Promise<TestcontainersModule> {
  let loaded: unknown;
  try {
    loaded = await importModule(TESTCONTAINERS_PACKAGE);
  } catch (error) {
    if (isModuleNotFound(error)) {
      throw new Error(
        `BATON_SERVER_PROVIDER=testcontainers, but the "testcontainers" package is not installed. ` +
          `It is optional and not a Baton dependency: install it yourself ` +
          `(e.g. npm install --no-save testcontainers@11; 12.x needs Node >= 22.19, this is Node ${process.versions.node}), ` +
          `or unset BATON_SERVER_PROVIDER to use local server binaries (${INSTALL_HINT}).`,
        { cause: error },
      );
    }
    throw new Error(
      `BATON_SERVER_PROVIDER=testcontainers, but importing "testcontainers" failed on Node ${process.versions.node}: ` +
        `${causeText(error)} (testcontainers 12.x crashes on import under Node 20; use 11.x).`,
      { cause: error },
    );
  }
  const module = loaded as Partial<TestcontainersModule>;
  if (typeof module.GenericContainer !== "function" || typeof module.Network !== "function") {
    throw new Error(
      `the installed "testcontainers" package does not export GenericContainer and Network`,
    );
  }
  return module as TestcontainersModule;
}

/**
 * Checks that a Docker-compatible container engine is reachable.
 *
 * @throws Error saying no engine is reachable, with the cause
 */
export async function requireContainerEngine(module: TestcontainersModule): Promise<void> {
  if (module.getContainerRuntimeClient === undefined) {
    return;
  }
  try {
    await module.getContainerRuntimeClient();
  } catch (error) {
    throw new Error(
      `BATON_SERVER_PROVIDER=testcontainers, but no Docker (or compatible) container engine is reachable: ` +
        `${causeText(error)}. Start Docker or set DOCKER_HOST, ` +
        `or unset BATON_SERVER_PROVIDER to use local server binaries (${INSTALL_HINT}).`,
      { cause: error },
    );
  }
}

/** Servers running in containers. */
export interface ContainerServerSet {
  /** Connection URLs, by kind. */
  readonly urls: Partial<Record<ServerKind, string>>;
  /** Stops every container and network this provider started. */
  stop(): Promise<void>;
}

/** Options for {@link startContainerServers}. */
export interface ContainerStartOptions {
  /** Time allowed for each container group to become ready. */
  readonly timeoutMs: number;
  /** The importer for `testcontainers`; tests pass a fake. */
  readonly importModule?: ModuleImporter;
}

class ContainerTracker {
  readonly containers: StartedContainerLike[] = [];
  readonly networks: StartedNetworkLike[] = [];

  async stop(): Promise<void> {
    await Promise.allSettled(this.containers.map((container) => container.stop()));
    await Promise.allSettled(this.networks.map((network) => network.stop()));
  }
}

async function startRedisContainers(
  tc: TestcontainersModule,
  tracker: ContainerTracker,
  count: number,
  timeoutMs: number,
): Promise<string[]> {
  return Promise.all(
    Array.from({ length: count }, async () => {
      const container = await new tc.GenericContainer(CONTAINER_IMAGES.redis)
        .withExposedPorts(6379)
        .withCommand(["redis-server", "--save", "", "--appendonly", "no"])
        .withWaitStrategy(tc.Wait.forLogMessage(/Ready to accept connections/))
        .withStartupTimeout(timeoutMs)
        .start();
      tracker.containers.push(container);
      return `${container.getHost()}:${container.getMappedPort(6379)}`;
    }),
  );
}

async function startEtcdContainers(
  tc: TestcontainersModule,
  tracker: ContainerTracker,
  timeoutMs: number,
): Promise<string> {
  const network = await new tc.Network().start();
  tracker.networks.push(network);
  const names = ["e1", "e2", "e3"];
  const initialCluster = names.map((name) => `${name}=http://${name}:2380`).join(",");
  const containers = await Promise.all(
    names.map(async (name) => {
      const container = await new tc.GenericContainer(CONTAINER_IMAGES.etcd)
        .withNetwork(network)
        .withNetworkAliases(name)
        .withExposedPorts(2379)
        .withCommand([
          "/usr/local/bin/etcd",
          `--name=${name}`,
          "--data-dir=/etcd-data",
          "--listen-client-urls=http://0.0.0.0:2379",
          `--advertise-client-urls=http://${name}:2379`,
          "--listen-peer-urls=http://0.0.0.0:2380",
          `--initial-advertise-peer-urls=http://${name}:2380`,
          `--initial-cluster=${initialCluster}`,
          "--initial-cluster-state=new",
          "--initial-cluster-token=baton",
          "--log-level=warn",
        ])
        .withWaitStrategy(tc.Wait.forListeningPorts())
        .withStartupTimeout(timeoutMs)
        .start();
      tracker.containers.push(container);
      return container;
    }),
  );
  const endpoints = containers.map((c) => ({ host: c.getHost(), port: c.getMappedPort(2379) }));
  await waitUntil("etcd containers healthy", timeoutMs, async () => {
    const healthy = await Promise.all(endpoints.map(({ host, port }) => etcdHealthy(host, port)));
    return healthy.every(Boolean);
  });
  return `etcd://${endpoints.map(({ host, port }) => `${host}:${port}`).join(",")}`;
}

async function startZookeeperContainers(
  tc: TestcontainersModule,
  tracker: ContainerTracker,
  timeoutMs: number,
): Promise<string> {
  const network = await new tc.Network().start();
  tracker.networks.push(network);
  const ids = [1, 2, 3];
  const servers = ids.map((id) => `server.${id}=zk${id}:2888:3888;2181`).join(" ");
  const containers = await Promise.all(
    ids.map(async (id) => {
      const container = await new tc.GenericContainer(CONTAINER_IMAGES.zookeeper)
        .withNetwork(network)
        .withNetworkAliases(`zk${id}`)
        .withExposedPorts(2181)
        .withEnvironment({
          ZOO_MY_ID: String(id),
          ZOO_SERVERS: servers,
          ZOO_TICK_TIME: "500",
          ZOO_INIT_LIMIT: "20",
          ZOO_SYNC_LIMIT: "10",
          ZOO_4LW_COMMANDS_WHITELIST: "ruok,srvr,stat,mntr,cons",
          ZOO_ADMINSERVER_ENABLED: "false",
          ZOO_CFG_EXTRA: "minSessionTimeout=1000 maxSessionTimeout=60000",
        })
        .withWaitStrategy(tc.Wait.forListeningPorts())
        .withStartupTimeout(timeoutMs)
        .start();
      tracker.containers.push(container);
      return container;
    }),
  );
  const endpoints = containers.map((c) => ({ host: c.getHost(), port: c.getMappedPort(2181) }));
  await waitUntil("zookeeper containers serving", timeoutMs, async () => {
    const serving = await Promise.all(
      endpoints.map(({ host, port }) => zookeeperServing(host, port)),
    );
    return serving.every(Boolean);
  });
  return `zookeeper://${endpoints.map(({ host, port }) => `${host}:${port}`).join(",")}`;
}

async function startPostgresContainer(
  tc: TestcontainersModule,
  tracker: ContainerTracker,
  timeoutMs: number,
): Promise<string> {
  const container = await new tc.GenericContainer(CONTAINER_IMAGES.postgres)
    .withExposedPorts(5432)
    .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: "trust" })
    .withCommand(["postgres", "-c", "fsync=off", "-c", "max_connections=200"])
    .withWaitStrategy(tc.Wait.forLogMessage(/database system is ready to accept connections/, 2))
    .withStartupTimeout(timeoutMs)
    .start();
  tracker.containers.push(container);
  return `postgres://postgres@${container.getHost()}:${container.getMappedPort(5432)}/postgres`;
}

/**
 * Starts the requested servers as containers through the optional
 * `testcontainers` package. Loaded only when `BATON_SERVER_PROVIDER` is
 * `testcontainers`; the default local provider never imports it.
 *
 * Containers have no PIDs on this host: no fault-injection handles are
 * returned, only URLs.
 *
 * @throws Error when the package is missing or cannot be imported, when no
 *   container engine is reachable, or when a container fails to start
 */
export async function startContainerServers(
  kinds: readonly ServerKind[],
  options: ContainerStartOptions,
): Promise<ContainerServerSet> {
  const tc = await loadTestcontainers(options.importModule);
  await requireContainerEngine(tc);
  const tracker = new ContainerTracker();
  const urls: Partial<Record<ServerKind, string>> = {};
  const { timeoutMs } = options;
  try {
    await Promise.all(
      kinds.map(async (kind) => {
        switch (kind) {
          case "redis": {
            const [address] = await startRedisContainers(tc, tracker, 1, timeoutMs);
            urls.redis = `redis://${address}`;
            break;
          }
          case "redlock":
            urls.redlock = `redlock://${(await startRedisContainers(tc, tracker, 5, timeoutMs)).join(",")}`;
            break;
          case "etcd":
            urls.etcd = await startEtcdContainers(tc, tracker, timeoutMs);
            break;
          case "zookeeper":
            urls.zookeeper = await startZookeeperContainers(tc, tracker, timeoutMs);
            break;
          case "postgres":
            urls.postgres = await startPostgresContainer(tc, tracker, timeoutMs);
            break;
          default:
            throw new Error(
              `${kind}: the testcontainers provider does not start this backend's servers; use the local provider (BATON_SERVER_PROVIDER=local)`,
            );
        }
      }),
    );
  } catch (error) {
    await tracker.stop();
    throw error;
  }
  return { urls, stop: () => tracker.stop() };
}
