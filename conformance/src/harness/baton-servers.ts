import type { BackendKind, ServerKind } from "./backend-kind.js";

/**
 * Connection URLs of the servers the harness started, handed to tests with
 * `inject("batonServers")`. Every value is plain data, so it crosses from the
 * vitest main process into the test workers.
 *
 * A URL is present only for a backend that was selected and whose server
 * started. Formats:
 * - `redis`: `redis://127.0.0.1:P`
 * - `redlock`: `redlock://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3,127.0.0.1:P4,127.0.0.1:P5`
 * - `etcd`: `etcd://127.0.0.1:C1,127.0.0.1:C2,127.0.0.1:C3` (client ports)
 * - `zookeeper`: `zookeeper://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3`
 * - `postgres`: `postgres://postgres@127.0.0.1:P/postgres`
 * - `postgres-lease`: `postgres://postgres@127.0.0.1:B/postgres?locks=lease` (PgBouncer)
 * - `dynamodb`: `dynamodb://local:local-secret@127.0.0.1:P/baton-locks?region=us-east-1&tls=false&createTable=true` (dynalite)
 * - `azure-blob`: `azblob://devstoreaccount1@127.0.0.1:P/baton` (Azurite)
 * - `mysql`: `mysql://baton:baton-secret@127.0.0.1:P/baton` (MariaDB)
 * - `mysql-lease`: `mariadb://baton:baton-secret@127.0.0.1:P/baton?mode=row-lease` (the same server)
 */
export interface BatonServers {
  /** The backends selected by `BATON_BACKENDS` for this run. */
  readonly selected: readonly BackendKind[];
  /** Which provider started the servers. */
  readonly provider: "local" | "testcontainers";
  /** A single Redis node. */
  readonly redis?: string;
  /** Five independent Redis nodes for Redlock. */
  readonly redlock?: string;
  /** A 3-member etcd cluster. */
  readonly etcd?: string;
  /** A 3-node ZooKeeper ensemble. */
  readonly zookeeper?: string;
  /** A PostgreSQL server with superuser `postgres`, trust auth, database `postgres`. */
  readonly postgres?: string;
  /**
   * PgBouncer in transaction pooling mode in front of a PostgreSQL server of its own, with
   * `?locks=lease` (the row-lease mode, the one that works through such a pooler).
   */
  readonly "postgres-lease"?: string;
  /** dynalite (a DynamoDB implementation), in memory; the table is created on first use. */
  readonly dynamodb?: string;
  /** Azurite's Blob service, in memory; the container is created on first use. */
  readonly "azure-blob"?: string;
  /**
   * A MariaDB server with database `baton` and user `baton` (password `baton-secret`, all
   * privileges), for the named-lock mode of `@baton/mysql`.
   */
  readonly mysql?: string;
  /**
   * The same MariaDB server as `mysql` when both are selected, by a `mariadb://` URL with
   * `?mode=row-lease` (the row-lease mode).
   */
  readonly "mysql-lease"?: string;
  /**
   * Selected backends that could not be started because their server
   * binaries are missing, with a human-readable reason that says what to
   * install.
   */
  readonly unavailable: Readonly<Partial<Record<ServerKind, string>>>;
}

declare module "vitest" {
  interface ProvidedContext {
    /** The servers started by the harness global setup. */
    batonServers: BatonServers;
  }
}
