#!/usr/bin/env bash
# Start a throwaway PostgreSQL server for the store tests and print its SQLAlchemy URL.
#
#   export GPUCOST_TEST_PG_URL="$(infra/postgres-ci.sh)"
#   .venv/bin/pytest tests/integration
#   infra/postgres-ci.sh --stop            # stops the server started last
#
# Uses postgres/initdb/pg_ctl from PATH or /usr/lib/postgresql/*/bin, installing the Debian
# package when neither has them. The server runs as a non-root user (PostgreSQL refuses root),
# listens on 127.0.0.1 only, trusts local connections and keeps its data in a temporary folder.
# Only the URL goes to stdout; everything else goes to stderr.
set -euo pipefail
# useradd and runuser live in sbin, which a non-login PATH may lack.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

# GPUCOST_PG_STATE names the state file, so several servers can run side by side.
STATE_FILE="${GPUCOST_PG_STATE:-${TMPDIR:-/tmp}/gpucost-postgres-ci.state}"
DB_NAME="${GPUCOST_PG_DB:-gpucost_test}"
DB_USER="gpucost"
RUN_AS="${GPUCOST_PG_OS_USER:-postgres}"

log() { echo "postgres-ci: $*" >&2; }

find_bin_dir() {
    if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
        dirname "$(command -v pg_ctl)"
        return 0
    fi
    local d
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$d/pg_ctl" ] && [ -x "$d/initdb" ]; then
            echo "$d"
            return 0
        fi
    done
    return 1
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Run a command as the server's OS user (root may not run PostgreSQL).
as_pg() {
    if [ "$(id -u)" -ne 0 ]; then
        "$@"
    elif command -v runuser >/dev/null 2>&1; then
        runuser -u "$RUN_AS" -- "$@"
    else
        su -s /bin/sh "$RUN_AS" -c "$(printf '%q ' "$@")"
    fi
}

port_in_use() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

if [ "${1:-}" = "--stop" ]; then
    if [ -f "$STATE_FILE" ]; then
        # shellcheck disable=SC1090
        . "$STATE_FILE"
        RUN_AS="${PG_OS_USER:-$RUN_AS}"
        if as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w stop >&2; then
            rm -rf "$PG_DATA" "$STATE_FILE"
            log "stopped"
        else
            log "could not stop the server in $PG_DATA; left it and its data in place"
            exit 1
        fi
    else
        log "nothing to stop"
    fi
    exit 0
fi

if ! PG_BIN="$(find_bin_dir)"; then
    log "PostgreSQL not found; installing the Debian package"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
    PG_BIN="$(find_bin_dir)" || { log "postgresql installed but pg_ctl not found"; exit 1; }
fi
log "using $("$PG_BIN/pg_ctl" --version) from $PG_BIN"

if [ "$(id -u)" -eq 0 ] && ! id "$RUN_AS" >/dev/null 2>&1; then
    log "creating OS user $RUN_AS to run the server"
    as_root useradd --system --no-create-home --shell /usr/sbin/nologin "$RUN_AS"
fi

PG_DATA="$(mktemp -d "${TMPDIR:-/tmp}/gpucost-pg.XXXXXX")"
if [ "$(id -u)" -eq 0 ]; then chown "$RUN_AS" "$PG_DATA"; fi
chmod 700 "$PG_DATA"

PORT="${GPUCOST_PG_PORT:-55432}"
while port_in_use "$PORT"; do PORT=$((PORT + 1)); done

as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U "$DB_USER" --auth=trust -E UTF8 --no-locale >/dev/null
as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_DATA/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $PORT -c unix_socket_directories=$PG_DATA -c fsync=off" \
    start >&2

printf 'PG_BIN=%q\nPG_DATA=%q\nPG_PORT=%q\nPG_OS_USER=%q\n' "$PG_BIN" "$PG_DATA" "$PORT" "$RUN_AS" >"$STATE_FILE"

PSQL="$(command -v psql || echo "$PG_BIN/psql")"
"$PSQL" -X -q -h 127.0.0.1 -p "$PORT" -U "$DB_USER" -d postgres \
    -c "CREATE DATABASE \"$DB_NAME\"" >&2
log "server on 127.0.0.1:$PORT, data in $PG_DATA (stop: $0 --stop)"
echo "postgresql+psycopg://$DB_USER@127.0.0.1:$PORT/$DB_NAME"
