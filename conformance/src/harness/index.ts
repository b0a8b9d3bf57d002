/**
 * The real-server harness: starts Redis, etcd, ZooKeeper and PostgreSQL
 * from local binaries on loopback (or, optionally, with testcontainers),
 * hands their URLs to vitest tests, and gives fault-injection tests
 * PID-level control over every member.
 *
 * Shared servers: the root `vitest.config.ts` runs `global-setup.ts`, and
 * tests read the URLs with `inject("batonServers")` or wrap their blocks in
 * {@link describeBackend}. Fault-injection tests should start private
 * servers with {@link startServers} (e.g. `startServers({ backends: ["etcd"] })`)
 * and use `groups.etcd.kill(1)`, `pause(0)`, `restart(1)`, so they never
 * disturb the shared ones.
 *
 * Environment:
 * - `BATON_BACKENDS`: comma list of memory, redis, redlock, etcd,
 *   zookeeper, postgres, postgres-lease, dynamodb, azure-blob, mysql, mysql-lease (default:
 *   see `DEFAULT_BACKENDS`); only those servers start.
 * - `BATON_SERVER_PROVIDER`: `local` (default) or `testcontainers`.
 * - `BATON_KEEP_LOGS=1`: keep the temp dir (data and logs) after every run;
 *   without it only logs are kept, and only when tests failed.
 * - `BATON_SERVER_START_TIMEOUT_MS`: readiness timeout per group (30 s).
 * - `BATON_REDIS_SERVER`, `BATON_ETCD`, `BATON_JAVA`, `BATON_ZOOKEEPER_JAR`,
 *   `BATON_SLF4J_JAR`, `BATON_PG_BIN_DIR`, `BATON_MARIADBD`, `BATON_MARIADB_INSTALL_DB`:
 *   where the server binaries are.
 * - `CI=true`: a selected backend whose binaries are missing fails the run
 *   instead of being skipped.
 *
 * @packageDocumentation
 * @module @baton/conformance/harness
 */

export {
  AZURITE_ACCOUNT,
  AZURITE_CONTAINER,
  azuriteAnswers,
  startAzurite,
} from "./azurite-server.js";
export { type BackendDecision, decideBackend, isCI, MEMORY_URL } from "./backend-decision.js";
export {
  ALL_BACKENDS,
  type BackendKind,
  DEFAULT_BACKENDS,
  isBackendKind,
  isServerKind,
  SERVER_KINDS,
  type ServerKind,
} from "./backend-kind.js";
export { BACKENDS_ENV, parseBackendList, selectedBackends } from "./backend-selection.js";
export type { BatonServers } from "./baton-servers.js";
export { backendUrl, describeBackend } from "./describe-backend.js";
export { DYNALITE_TABLE, listTables, startDynalite } from "./dynalite-server.js";
export { type EtcdStartOptions, startEtcdCluster } from "./etcd-cluster.js";
export {
  etcdActivePeers,
  etcdHealthy,
  etcdIsLeader,
  etcdSettleBeforeStop,
} from "./etcd-health.js";
export { addExitCleanup, type ExitCleanupPhase, type ExitCleanupTask } from "./exit-cleanup.js";
export { findOnPath } from "./find-on-path.js";
export { freePort, freePorts } from "./free-port.js";
export { type LocalServerSet, startLocalServer, startLocalServers } from "./local-provider.js";
export type { LocalStartOptions } from "./local-start-options.js";
export { formatLogTail, logTail } from "./log-tail.js";
export {
  DEFAULT_STOP_GRACE_MS,
  type ExitInfo,
  ManagedProcess,
  type ProcessSpec,
} from "./managed-process.js";
export { mariadbPing } from "./mariadb-ping.js";
export {
  groupForKind,
  MARIADB_DATABASE,
  MARIADB_PASSWORD,
  MARIADB_USER,
  type MariadbUrls,
  mariadbPort,
  mariadbUrls,
  startMariadb,
} from "./mariadb-server.js";
export { pgIsReady } from "./pg-isready.js";
export { startPostgresBehindPgBouncer } from "./pgbouncer-server.js";
export { startPostgres } from "./postgres-server.js";
export {
  checkIdentity,
  type IdentityCheck,
  type ProcessIdentity,
  readCmdline,
  readProcessState,
  readStartTime,
  type SignalOutcome,
  signalIfSame,
} from "./process-identity.js";
export { publishedDeclarationImports } from "./published-declarations.js";
export { type RedisClusterStartOptions, startRedisCluster } from "./redis-cluster.js";
export { redisPing } from "./redis-ping.js";
export { type RedisStartOptions, startRedisNodes } from "./redis-server.js";
export {
  BINARY_ENV,
  type BinaryLookup,
  findEtcdBinaries,
  findMariadbBinaries,
  findPostgresBinaries,
  findRedisBinaries,
  findZookeeperBinaries,
  INSTALL_HINT,
  missingBinaryReason,
} from "./server-binaries.js";
export type { MemberDefinition, ServerGroup, ServerMember } from "./server-group.js";
export {
  PROVIDER_ENV,
  SERVER_PROVIDERS,
  type ServerProviderName,
  selectedProvider,
} from "./server-provider.js";
export { isAddressInUse, ServerStartError } from "./server-start-error.js";
export {
  type StartedServers,
  type StartServersOptions,
  type StopServersOptions,
  type StopServersReport,
  startServers,
} from "./start-servers.js";
export { countResults, formatSummaryLine, type TestCounts } from "./summary-reporter.js";
export {
  CONTAINER_IMAGES,
  loadTestcontainers,
  type ModuleImporter,
  requireContainerEngine,
  startContainerServers,
  TESTCONTAINERS_PACKAGE,
  type TestcontainersModule,
} from "./testcontainers-provider.js";
export { DEFAULT_START_TIMEOUT_MS, START_TIMEOUT_ENV, startTimeoutMs } from "./wait-for-ready.js";
export { KEEP_LOGS_ENV, keepLogsRequested, pruneServerData } from "./work-dir.js";
export { startZookeeperEnsemble, type ZookeeperStartOptions } from "./zookeeper-ensemble.js";
export { type ZookeeperMode, zookeeperMode, zookeeperServing } from "./zookeeper-srvr.js";
