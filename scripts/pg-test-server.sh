#!/usr/bin/env bash
# A throwaway PostgreSQL server for the PostgreSQL store's tests and benchmark.
#
#   scripts/pg-test-server.sh start   # start (or reuse) one; prints `export LAZARUS_TEST_PG=…`
#   scripts/pg-test-server.sh url     # prints the URL of the running one
#   scripts/pg-test-server.sh stop    # stops it and deletes its data directory
#   scripts/pg-test-server.sh restart # crash-restart: stop -m immediate (no checkpoint, WAL
#                                     # recovery at start, like a power cut), same port
#
# Typical use:  eval "$(scripts/pg-test-server.sh start)"; cargo nextest run …; scripts/pg-test-server.sh stop
#
# TLS: the server also accepts TLS, with a certificate for 127.0.0.1 and localhost signed by
# a throwaway CA (openssl). `start` exports LAZARUS_TEST_PG_CA (that CA's PEM) and
# LAZARUS_TEST_PG_OTHER_CA (a CA that signed nothing here). The role `lazarus_tls` may
# connect only over TLS, so a test can prove a connection was encrypted.
#
# The server listens on 127.0.0.1 only, on a free port, with trust authentication for
# loopback connections, no Unix socket outside its own data directory, and fsync=on
# (durability settings are the defaults: fsync=on, synchronous_commit=on, full_page_writes=on).
# Its data directory lives in a fresh temporary directory; the state file
# ($LAZARUS_PG_STATE, default ${TMPDIR:-/tmp}/lazarus-pg-test.state) remembers it for `stop`.
# Running as root, initdb and pg_ctl run as the `postgres` user (created if missing).
# LAZARUS_PG_MAX_CONNECTIONS sets max_connections of a new server (default 300).
# PostgreSQL binaries: $PG_BIN, else /usr/lib/postgresql/<newest>/bin, else PATH; when none
# is found and we are root, the Debian package `postgresql` is installed.
set -euo pipefail

STATE="${LAZARUS_PG_STATE:-${TMPDIR:-/tmp}/lazarus-pg-test.state}"

die() {
    echo "pg-test-server: $*" >&2
    exit 1
}

find_bin() {
    if [[ -n "${PG_BIN:-}" && -x "$PG_BIN/pg_ctl" ]]; then
        echo "$PG_BIN"
        return 0
    fi
    local d
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [[ -x "$d/pg_ctl" && -x "$d/initdb" ]]; then
            echo "$d"
            return 0
        fi
    done
    if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
        dirname "$(command -v pg_ctl)"
        return 0
    fi
    return 1
}

ensure_bin() {
    local bin
    if bin=$(find_bin); then
        echo "$bin"
        return 0
    fi
    [[ $(id -u) -eq 0 ]] || die "no PostgreSQL binaries found (install the 'postgresql' package or set PG_BIN)"
    echo "pg-test-server: installing postgresql (apt-get)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 || true
    apt-get install -y -qq postgresql >&2 || die "apt-get install postgresql failed"
    bin=$(find_bin) || die "postgresql installed but pg_ctl/initdb not found"
    echo "$bin"
}

# as_pg CMD ARGS…: runs a command as the postgres user when we are root.
as_pg() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

port_in_use() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

read_state() {
    [[ -f "$STATE" ]] || return 1
    # shellcheck disable=SC1090
    source "$STATE"
    [[ -n "${PG_TMP:-}" && -n "${PG_PORT:-}" && -n "${PG_BIN_DIR:-}" ]]
}

url_of() {
    echo "postgres://postgres@127.0.0.1:$1/postgres"
}

# exports CMD: the lines `start` prints.
exports() {
    echo "export LAZARUS_TEST_PG=$(url_of "$PG_PORT")"
    if [[ -f "$PG_TMP/tls/ca.crt" ]]; then
        echo "export LAZARUS_TEST_PG_CA=$PG_TMP/tls/ca.crt"
        echo "export LAZARUS_TEST_PG_OTHER_CA=$PG_TMP/tls/other-ca.crt"
    fi
}

# make_certs DIR: a CA, a server certificate it signs (127.0.0.1, localhost), another CA.
make_certs() {
    local d=$1
    mkdir -p "$d"
    (
        cd "$d"
        openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=lazarus test CA" \
            -keyout ca.key -out ca.crt
        openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=lazarus other CA" \
            -keyout other-ca.key -out other-ca.crt
        openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout server.key -out server.csr
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n' >ext.cnf
        openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
            -extfile ext.cnf -out server.crt
        chmod 0600 server.key
    ) >"$d/openssl.log" 2>&1 || {
        cat "$d/openssl.log" >&2
        return 1
    }
    chmod 0644 "$d/ca.crt" "$d/other-ca.crt"
}

is_running() {
    [[ -d "$PG_TMP/data" ]] && as_pg "$PG_BIN_DIR/pg_ctl" -D "$PG_TMP/data" status >/dev/null 2>&1
}

cmd_start() {
    if read_state && is_running; then
        exports
        return 0
    fi
    # A stale state file (server gone, e.g. after a reboot): clean it up first.
    if [[ -f "$STATE" ]]; then
        cmd_stop >/dev/null 2>&1 || true
    fi
    local bin tmp
    bin=$(ensure_bin)
    if [[ $(id -u) -eq 0 ]] && ! id postgres >/dev/null 2>&1; then
        useradd --system --home-dir /nonexistent --shell /usr/sbin/nologin postgres
    fi
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/lazarus-pg.XXXXXX")
    chmod 0755 "$tmp"
    if [[ $(id -u) -eq 0 ]]; then
        chown postgres: "$tmp"
    fi
    as_pg "$bin/initdb" -D "$tmp/data" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
        >"$tmp/initdb.log" 2>&1 || {
        cat "$tmp/initdb.log" >&2
        rm -rf "$tmp"
        die "initdb failed"
    }
    command -v openssl >/dev/null 2>&1 || die "openssl is needed for the TLS certificates (apt-get install openssl)"
    make_certs "$tmp/tls" || {
        rm -rf "$tmp"
        die "making the TLS certificates failed"
    }
    if [[ $(id -u) -eq 0 ]]; then
        chown -R postgres: "$tmp/tls"
    fi
    cat >>"$tmp/data/postgresql.conf" <<EOF

# lazarus test server
ssl = on
ssl_cert_file = '$tmp/tls/server.crt'
ssl_key_file = '$tmp/tls/server.key'
listen_addresses = '127.0.0.1'
unix_socket_directories = '$tmp'
max_connections = ${LAZARUS_PG_MAX_CONNECTIONS:-300}
fsync = on
synchronous_commit = on
full_page_writes = on
log_min_messages = warning
EOF
    # trust on loopback only; nothing else may connect; lazarus_tls only over TLS
    cat >"$tmp/data/pg_hba.conf" <<EOF
local     all all         trust
hostssl   all lazarus_tls 127.0.0.1/32 trust
hostnossl all lazarus_tls 127.0.0.1/32 reject
host      all all         127.0.0.1/32 trust
EOF
    local port tries=0
    while :; do
        tries=$((tries + 1))
        [[ $tries -le 20 ]] || {
            rm -rf "$tmp"
            die "could not find a free port"
        }
        port=$((20000 + RANDOM % 40000))
        port_in_use "$port" && continue
        if as_pg "$bin/pg_ctl" -D "$tmp/data" -l "$tmp/server.log" -o "-p $port" -w -t 60 start \
            >/dev/null 2>&1; then
            break
        fi
        # the port may have been taken meanwhile: look at the log, try another one
        if ! grep -q -i "could not bind\|address already in use" "$tmp/server.log" 2>/dev/null; then
            cat "$tmp/server.log" >&2 || true
            rm -rf "$tmp"
            die "pg_ctl start failed"
        fi
    done
    as_pg "$bin/../bin/psql" -h "$tmp" -p "$port" -U postgres -d postgres -qAt \
        -c "CREATE ROLE lazarus_tls LOGIN SUPERUSER" >/dev/null 2>&1 ||
        as_pg psql -h "$tmp" -p "$port" -U postgres -d postgres -qAt \
            -c "CREATE ROLE lazarus_tls LOGIN SUPERUSER" >/dev/null || die "creating role lazarus_tls failed"
    {
        echo "PG_TMP=$tmp"
        echo "PG_PORT=$port"
        echo "PG_BIN_DIR=$bin"
    } >"$STATE"
    PG_TMP=$tmp PG_PORT=$port exports
}

cmd_stop() {
    if ! read_state; then
        rm -f "$STATE"
        return 0
    fi
    if [[ -d "$PG_TMP/data" ]]; then
        as_pg "$PG_BIN_DIR/pg_ctl" -D "$PG_TMP/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
    fi
    case "$PG_TMP" in
    */lazarus-pg.*) rm -rf "$PG_TMP" ;;
    *) echo "pg-test-server: not deleting unexpected path $PG_TMP" >&2 ;;
    esac
    rm -f "$STATE"
}

cmd_restart() {
    read_state && is_running || die "no test server running (run: $0 start)"
    as_pg "$PG_BIN_DIR/pg_ctl" -D "$PG_TMP/data" -m immediate -w -t 60 stop >/dev/null 2>&1 || true
    as_pg "$PG_BIN_DIR/pg_ctl" -D "$PG_TMP/data" -l "$PG_TMP/server.log" -o "-p $PG_PORT" -w -t 60 start \
        >/dev/null 2>&1 || {
        tail -20 "$PG_TMP/server.log" >&2 || true
        die "restart failed"
    }
}

cmd_url() {
    read_state && is_running || die "no test server running (run: $0 start)"
    url_of "$PG_PORT"
}

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
url) cmd_url ;;
restart) cmd_restart ;;
*)
    echo "usage: $0 start|stop|url|restart" >&2
    exit 2
    ;;
esac
