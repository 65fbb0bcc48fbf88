#!/usr/bin/env bash
# The local services `make test` and `make demo` need, installed from Debian's packages when missing and
# started on loopback when they do not answer. A service that already answers is left alone, and one that
# DATABASE_URL / REDIS_URL place on another host is not this script's business.
#
#   scripts/services.sh postgres   PostgreSQL for DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres)
#   scripts/services.sh redis      Redis for REDIS_URL (default redis://127.0.0.1:6379/0)
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_install() {
  echo "installing Debian packages: $*"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# host and port of a URL such as scheme://user:pw@host:port/path (defaults when absent)
url_host() { local rest="${1#*://}"; rest="${rest##*@}"; rest="${rest%%/*}"; echo "${rest%%:*}"; }
url_port() {
  local rest="${1#*://}"; rest="${rest##*@}"; rest="${rest%%/*}"
  if [[ "$rest" == *:* ]]; then echo "${rest##*:}"; else echo "$2"; fi
}
is_loopback() { [[ "$1" == 127.0.0.1 || "$1" == localhost || "$1" == "" ]]; }

wait_for() {  # wait_for NAME SECONDS COMMAND...
  local name=$1 seconds=$2; shift 2
  for _ in $(seq $((seconds * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "$name did not answer within ${seconds}s" >&2
  return 1
}

postgres() {
  local url="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
  [[ "$url" == postgres* ]] || { echo "DATABASE_URL is not PostgreSQL: nothing to start"; return 0; }
  local host port
  host=$(url_host "$url"); port=$(url_port "$url" 5432)
  is_loopback "$host" || { echo "PostgreSQL is on $host: not started here"; return 0; }
  command -v pg_isready >/dev/null 2>&1 && pg_isready -q -h 127.0.0.1 -p "$port" && return 0
  compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || apt_install postgresql
  local version
  version=$(ls /usr/lib/postgresql | sort -n | tail -1)
  if ! pg_lsclusters -h | awk -v p="$port" '$3 == p {found=1} END {exit !found}'; then
    as_root pg_createcluster "$version" mirrorplane --port "$port" >/dev/null
  fi
  local cluster
  cluster=$(pg_lsclusters -h | awk -v p="$port" '$3 == p {print $1 " " $2; exit}')
  # The suite connects as postgres over TCP without a password (a machine of tests and demos only).
  local hba="/etc/postgresql/${cluster% *}/${cluster#* }/pg_hba.conf"
  if ! as_root grep -q '^host all postgres 127.0.0.1/32 trust' "$hba"; then
    as_root sed -i '1i host all postgres 127.0.0.1/32 trust' "$hba"
  fi
  echo "starting PostgreSQL $cluster on 127.0.0.1:$port"
  # shellcheck disable=SC2086 # "version name" is two arguments
  as_root pg_ctlcluster $cluster start || as_root pg_ctlcluster $cluster reload
  wait_for PostgreSQL 30 pg_isready -q -h 127.0.0.1 -p "$port"
}

redis() {
  local url="${REDIS_URL:-redis://127.0.0.1:6379/0}"
  local host port
  host=$(url_host "$url"); port=$(url_port "$url" 6379)
  is_loopback "$host" || { echo "Redis is on $host: not started here"; return 0; }
  command -v redis-cli >/dev/null 2>&1 && redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1 && return 0
  command -v redis-server >/dev/null 2>&1 || apt_install redis-server
  echo "starting Redis on 127.0.0.1:$port"
  # In memory only: queues, leases and caches of tests and demos, nothing to keep across restarts.
  redis-server --bind 127.0.0.1 --port "$port" --daemonize yes --save '' --appendonly no \
    --logfile "${TMPDIR:-/tmp}/mirrorplane-redis-$port.log"
  wait_for Redis 30 redis-cli -h 127.0.0.1 -p "$port" ping
}

for service in "$@"; do
  case "$service" in
    postgres) postgres ;;
    redis) redis ;;
    *) echo "unknown service: $service (postgres, redis)" >&2; exit 2 ;;
  esac
done
