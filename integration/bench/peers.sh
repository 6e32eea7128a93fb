#!/usr/bin/env bash
# The peers that `ringrep-bench peers` measures ringrep against, from Debian's packages, each
# with a replica on the same machine, all on loopback ports:
#
#   MariaDB primary 127.0.0.1:23306 (row-based binlog, sync_binlog=1,
#           innodb_flush_log_at_trx_commit=1), replica 127.0.0.1:23307; user bench/bench
#   Redis   primary 127.0.0.1:26379 (appendonly, appendfsync always), replica 127.0.0.1:26380
#
# ringrep's own primary and replica are started by the benchmark itself.
#
#   integration/bench/peers.sh install      # apt-get the servers (skipped when present)
#   integration/bench/peers.sh start DIR    # fresh data directories under DIR, servers up
#   integration/bench/peers.sh stop DIR     # stop what `start DIR` started
#
# DIR must be on the disk being measured (not tmpfs): durable commits are bounded by its fsync.
# A full run writes several GB there (Redis's AOF grows with every write): keep 10 GB free.
set -euo pipefail

MARIADB_PRIMARY_PORT=23306
MARIADB_REPLICA_PORT=23307
REDIS_PRIMARY_PORT=26379
REDIS_REPLICA_PORT=26380

die() { echo "peers.sh: $*" >&2; exit 1; }

install_peers() {
    if command -v mariadbd >/dev/null && command -v redis-server >/dev/null; then
        echo "mariadb-server and redis-server are installed"
        return
    fi
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends \
        mariadb-server mariadb-client redis-server
}

# Waits until `mariadb` can run a statement through the socket of data directory $1.
wait_mariadb() {
    for _ in $(seq 1 120); do
        if mariadb --no-defaults -S "$1/mysqld.sock" -uroot -e 'SELECT 1' >/dev/null 2>&1; then
            return
        fi
        sleep 0.5
    done
    die "MariaDB in $1 did not start; see $1/error.log"
}

start_mariadb() { # dir port server-id extra-options...
    local dir=$1 port=$2 id=$3
    shift 3
    mkdir -p "$dir"
    mariadb-install-db --no-defaults --datadir="$dir" --user="$(id -un)" \
        --skip-test-db >"$dir/install.log" 2>&1 || die "mariadb-install-db failed; see $dir/install.log"
    # Durability as the benchmark requires on both sides; a buffer pool that holds the whole
    # workload so that neither side waits on reads.
    mariadbd --no-defaults --datadir="$dir" --user="$(id -un)" \
        --bind-address=127.0.0.1 --port="$port" --socket="$dir/mysqld.sock" \
        --pid-file="$dir/mysqld.pid" --log-error="$dir/error.log" \
        --server-id="$id" --skip-name-resolve \
        --innodb-flush-log-at-trx-commit=1 --innodb-buffer-pool-size=1G \
        --innodb-log-file-size=512M --max-connections=300 "$@" >>"$dir/stderr.log" 2>&1 &
    wait_mariadb "$dir"
    mariadb --no-defaults -S "$dir/mysqld.sock" -uroot -e "
        SET sql_log_bin = 0;
        CREATE USER bench@'127.0.0.1' IDENTIFIED BY 'bench';
        GRANT ALL ON *.* TO bench@'127.0.0.1';"
}

start_redis() { # dir port extra-options...
    local dir=$1 port=$2
    shift 2
    mkdir -p "$dir"
    redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --daemonize yes \
        --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --save '' \
        --appendonly yes --appendfsync always "$@"
    for _ in $(seq 1 60); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && return
        sleep 0.5
    done
    die "Redis on port $port did not start; see $dir/redis.log"
}

start_peers() {
    local base=${1:?usage: peers.sh start DIR}
    command -v mariadbd >/dev/null || die "mariadbd not found: run 'peers.sh install' first"
    [ ! -e "$base/mariadb-primary" ] || die "$base already holds peers: run 'peers.sh stop $base' or pick another DIR"
    mkdir -p "$base"
    base=$(cd "$base" && pwd)

    start_mariadb "$base/mariadb-primary" $MARIADB_PRIMARY_PORT 1 \
        --log-bin="$base/mariadb-primary/binlog" --binlog-format=ROW --sync-binlog=1
    start_mariadb "$base/mariadb-replica" $MARIADB_REPLICA_PORT 2 \
        --relay-log="$base/mariadb-replica/relay" --read-only=1
    mariadb --no-defaults -S "$base/mariadb-replica/mysqld.sock" -uroot -e "
        CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$MARIADB_PRIMARY_PORT,
            MASTER_USER='bench', MASTER_PASSWORD='bench', MASTER_USE_GTID=slave_pos;
        START SLAVE;"
    echo "MariaDB primary 127.0.0.1:$MARIADB_PRIMARY_PORT, replica 127.0.0.1:$MARIADB_REPLICA_PORT"

    start_redis "$base/redis-primary" $REDIS_PRIMARY_PORT
    start_redis "$base/redis-replica" $REDIS_REPLICA_PORT --replicaof 127.0.0.1 $REDIS_PRIMARY_PORT
    echo "Redis primary 127.0.0.1:$REDIS_PRIMARY_PORT, replica 127.0.0.1:$REDIS_REPLICA_PORT"
}

stop_peers() {
    local base=${1:?usage: peers.sh stop DIR}
    for d in mariadb-replica mariadb-primary; do
        if [ -S "$base/$d/mysqld.sock" ]; then
            mariadb-admin --no-defaults -S "$base/$d/mysqld.sock" -uroot shutdown || true
        fi
    done
    for port in $REDIS_REPLICA_PORT $REDIS_PRIMARY_PORT; do
        redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    done
    echo "peers in $base stopped (data left in place; remove $base to start afresh)"
}

case "${1:-}" in
    install) install_peers ;;
    start) start_peers "${2:-}" ;;
    stop) stop_peers "${2:-}" ;;
    *) die "usage: peers.sh install | start DIR | stop DIR" ;;
esac
