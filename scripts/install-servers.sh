#!/usr/bin/env bash
# Installs the four real servers the Baton conformance suite runs against:
# Redis, etcd (server + etcdctl), ZooKeeper (with Java) and PostgreSQL.
#
# Idempotent: when everything is already present it does nothing and says so.
# As root it installs what is missing with apt-get; otherwise it prints the
# command to run and exits non-zero.
set -euo pipefail

PACKAGES=(redis-server etcd-server etcd-client zookeeper postgresql)

missing=()

have_cmd() {
  command -v "$1" >/dev/null 2>&1
}

have_glob() {
  compgen -G "$1" >/dev/null 2>&1
}

have_cmd redis-server || missing+=("redis-server")
have_cmd etcd || missing+=("etcd")
have_cmd etcdctl || missing+=("etcdctl")
[[ -f /usr/share/java/zookeeper.jar ]] || missing+=("/usr/share/java/zookeeper.jar")
have_cmd java || missing+=("java")
have_glob '/usr/lib/postgresql/*/bin/postgres' || missing+=("/usr/lib/postgresql/*/bin/postgres")

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-servers: redis-server, etcd, etcdctl, zookeeper, java and postgres are all present; nothing to do."
  exit 0
fi

echo "install-servers: missing: ${missing[*]}"

if [[ ${EUID} -ne 0 ]]; then
  echo "install-servers: not running as root; install them with:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${PACKAGES[*]}" >&2
  echo "or run: sudo bash scripts/install-servers.sh" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "${PACKAGES[@]}"

# Verify that the install produced what the harness needs.
still_missing=()
have_cmd redis-server || still_missing+=("redis-server")
have_cmd etcd || still_missing+=("etcd")
have_cmd etcdctl || still_missing+=("etcdctl")
[[ -f /usr/share/java/zookeeper.jar ]] || still_missing+=("/usr/share/java/zookeeper.jar")
have_cmd java || still_missing+=("java")
have_glob '/usr/lib/postgresql/*/bin/postgres' || still_missing+=("/usr/lib/postgresql/*/bin/postgres")
if [[ ${#still_missing[@]} -ne 0 ]]; then
  echo "install-servers: still missing after apt-get install: ${still_missing[*]}" >&2
  exit 1
fi
echo "install-servers: done."
