#!/usr/bin/env bash
# Installs the real servers the Baton tests run against, from Debian's packages:
# Redis, etcd (server + etcdctl), ZooKeeper (with Java, and the Curator and kazoo clients the
# interoperability tests run), PostgreSQL, PgBouncer and MariaDB. DynamoDB (dynalite) and Azure
# Blob Storage (Azurite) come from npm with `npm ci`. `chromium` is the headless browser the
# `baton dashboard` page test drives (BATON_CHROMIUM overrides its path, /usr/bin/chromium).
#
#   bash scripts/install-servers.sh [BACKEND ...]
#
# BACKEND is one of memory, redis, redlock, etcd, zookeeper, postgres, postgres-lease, dynamodb,
# azure-blob, mysql, mysql-lease, or chromium (default: those an unset BATON_BACKENDS runs, see
# DEFAULT_BACKENDS in conformance/src/harness/backend-kind.ts);
# only the servers those backends need are checked. Idempotent: when everything needed is
# present it does nothing and says so. As root it installs what is missing with apt-get;
# otherwise it prints the one command to run and exits non-zero.
set -euo pipefail

backends=("$@")
[[ ${#backends[@]} -gt 0 ]] || backends=(redis etcd zookeeper postgres postgres-lease dynamodb azure-blob mysql mysql-lease chromium)

have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_glob() { compgen -G "$1" >/dev/null 2>&1; }

# Prints "package what-is-missing" for each missing server binary the backends need.
missing_servers() {
  local kind
  for kind in "${backends[@]}"; do
    case "$kind" in
      memory) ;;
      redis | redlock) have_cmd redis-server || echo "redis-server redis-server" ;;
      etcd)
        have_cmd etcd || echo "etcd-server etcd"
        have_cmd etcdctl || echo "etcd-client etcdctl"
        ;;
      zookeeper)
        [[ -f /usr/share/java/zookeeper.jar ]] || echo "zookeeper /usr/share/java/zookeeper.jar"
        have_cmd java || echo "zookeeper java"
        [[ -f /usr/share/java/curator-recipes.jar ]] || echo "libcurator-recipes-java /usr/share/java/curator-recipes.jar"
        [[ -f /usr/lib/python3/dist-packages/kazoo/__init__.py ]] || echo "python3-kazoo kazoo"
        ;;
      postgres) have_glob '/usr/lib/postgresql/*/bin/postgres' || echo "postgresql postgres" ;;
      postgres-lease)
        have_glob '/usr/lib/postgresql/*/bin/postgres' || echo "postgresql postgres"
        have_cmd pgbouncer || [[ -x /usr/sbin/pgbouncer ]] || echo "pgbouncer pgbouncer"
        ;;
      dynamodb | azure-blob) ;;
      mysql | mysql-lease)
        have_cmd mariadbd || [[ -x /usr/sbin/mariadbd ]] || echo "mariadb-server mariadbd"
        have_cmd mariadb-install-db || echo "mariadb-server mariadb-install-db"
        ;;
      chromium) [[ -x "${BATON_CHROMIUM:-/usr/bin/chromium}" ]] || echo "chromium chromium" ;;
      *)
        echo "install-servers: unknown backend \"$kind\" (memory, redis, redlock, etcd, zookeeper, postgres, postgres-lease, dynamodb, azure-blob, mysql, mysql-lease, chromium)" >&2
        exit 2
        ;;
    esac
  done
}

missing=$(missing_servers | sort -u)
if [[ -z "$missing" ]]; then
  echo "install-servers: the servers for ${backends[*]} are present; nothing to do."
  exit 0
fi
packages=$(cut -d' ' -f1 <<<"$missing" | sort -u | tr '\n' ' ')
echo "install-servers: missing: $(cut -d' ' -f2 <<<"$missing" | tr '\n' ' ')"

if [[ ${EUID} -ne 0 ]] || ! have_cmd apt-get; then
  echo "install-servers: cannot install them from here (needs root and apt-get). Run:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${packages}" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends ${packages}

still=$(missing_servers)
if [[ -n "$still" ]]; then
  echo "install-servers: still missing after apt-get install: $(cut -d' ' -f2 <<<"$still" | tr '\n' ' ')" >&2
  exit 1
fi
echo "install-servers: done."
