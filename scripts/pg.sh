#!/usr/bin/env bash
# Throwaway local PostgreSQL clusters for tests and the dev stack.
#
#   pg.sh ensure-installed      find (or apt-get install) PostgreSQL; print its bin dir
#   pg.sh start DIR [PORT]      create the cluster in DIR if needed, start it (idempotent);
#                               print its URL: postgres://opledger_admin@127.0.0.1:PORT/postgres
#   pg.sh stop DIR              fast stop if running (idempotent)
#   pg.sh url DIR               print the URL of the running cluster in DIR
#   pg.sh destroy DIR           stop and remove DIR
#
# Environment:
#   OPLEDGER_PG_FAST=1          (start) fsync/synchronous_commit/full_page_writes off: tests only,
#                               a crash of the machine can corrupt such a cluster.
#
# Layout of DIR: data/ (PGDATA), log/postgres.log, port, run/ (unix socket, when the path is
# short enough; else /tmp/opledger-pg-<hash of DIR>), .opledger-pg (marker: destroy refuses to
# remove a non-empty folder without it).
#
# Only stdout carries results; every diagnostic goes to stderr.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export OPLEDGER_LOG_PREFIX="pg.sh"

PG_SUPERUSER="opledger_admin"
# PostgreSQL refuses to run as root: as root we run the server as this existing system user.
PG_OS_USER="postgres"
START_TIMEOUT_SECS=30

usage() {
    sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# --- finding / installing PostgreSQL ---------------------------------------------------------

# Major version ("15", "16", "9.6") printed by an initdb binary.
initdb_version() {
    "$1" --version 2>/dev/null | sed -n 's/.*PostgreSQL) \([0-9][0-9]*\(\.[0-9]*\)\{0,1\}\).*/\1/p' |
        head -n1
}

# Print the bin dir of the highest PostgreSQL version found (PATH, /usr/lib/postgresql/*/bin),
# or fail.
find_pg_bin() {
    local candidates=() c real best="" best_ver="" ver
    if c="$(command -v initdb 2>/dev/null)"; then
        candidates+=("$c")
    fi
    for c in /usr/lib/postgresql/*/bin/initdb; do
        [[ -x "$c" ]] && candidates+=("$c")
    done
    for c in "${candidates[@]+"${candidates[@]}"}"; do
        real="$(readlink -f "$c")"
        ver="$(initdb_version "$real")"
        [[ -n "$ver" ]] || continue
        if [[ -z "$best" ]] ||
            [[ "$(printf '%s\n%s\n' "$best_ver" "$ver" | sort -V | tail -n1)" == "$ver" &&
                "$ver" != "$best_ver" ]]; then
            best="$real"
            best_ver="$ver"
        fi
    done
    [[ -n "$best" ]] || return 1
    dirname "$best"
}

install_pg() {
    log "no PostgreSQL server (initdb) found: installing it with apt-get"
    local sudo=()
    if ! is_root; then
        command -v sudo >/dev/null 2>&1 ||
            die "PostgreSQL is not installed and this is not root: install postgresql (apt-get install -y postgresql postgresql-contrib)"
        sudo=(sudo)
    fi
    "${sudo[@]+"${sudo[@]}"}" env DEBIAN_FRONTEND=noninteractive apt-get update >&2
    "${sudo[@]+"${sudo[@]}"}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends postgresql postgresql-contrib >&2
}

ensure_installed() {
    local bin
    if ! bin="$(find_pg_bin)"; then
        install_pg
        bin="$(find_pg_bin)" || die "PostgreSQL was installed but no initdb was found"
    fi
    for tool in initdb pg_ctl postgres pg_isready; do
        [[ -x "$bin/$tool" ]] || die "$bin/$tool is missing"
    done
    printf '%s\n' "$bin"
}

# --- running as the cluster's owner ----------------------------------------------------------


# As root: make sure $PG_OS_USER exists and can reach DIR; hand DIR's own folders to it.
prepare_ownership() {
    is_root || return 0
    id -u "$PG_OS_USER" >/dev/null 2>&1 ||
        die "running as root but there is no '$PG_OS_USER' system user to run PostgreSQL as (it comes with Debian's postgresql package)"
    if ! runuser -u "$PG_OS_USER" -- test -x "$DIR"; then
        # Find the first ancestor the user cannot traverse, to say so clearly.
        local d="" part blocked="$DIR"
        local IFS=/
        for part in $DIR; do
            [[ -n "$part" ]] || continue
            d="$d/$part"
            if ! runuser -u "$PG_OS_USER" -- test -x "$d"; then
                blocked="$d"
                break
            fi
        done
        die "PostgreSQL runs as the '$PG_OS_USER' user (it refuses to run as root), which cannot traverse '$blocked' (needed to reach $DIR). Allow it (e.g. chmod o+x '$blocked') or put the cluster elsewhere (e.g. under /tmp)."
    fi
    chown "$PG_OS_USER:" "$DIR" "$DIR/log" "$SOCKET_DIR"
    [[ -e "$DIR/log/postgres.log" ]] && chown "$PG_OS_USER:" "$DIR/log/postgres.log"
    [[ -d "$DIR/data" ]] && chown -R "$PG_OS_USER:" "$DIR/data"
    return 0
}

# --- cluster state ---------------------------------------------------------------------------

set_dir() {
    [[ -n "${1:-}" ]] || usage
    DIR="$(abs_path "$1")"
    DATA="$DIR/data"
    LOGFILE="$DIR/log/postgres.log"
    PORT_FILE="$DIR/port"
    # Unix socket paths are limited to ~107 bytes (sun_path): keep ".s.PGSQL.NNNNN.lock" inside.
    local socket_suffix="/run/.s.PGSQL.65535.lock"
    if ((${#DIR} + ${#socket_suffix} <= 100)); then
        SOCKET_DIR="$DIR/run"
    else
        SOCKET_DIR="/tmp/opledger-pg-$(sha256_hex "$DIR" | cut -c1-16)"
    fi
}

# One start/stop at a time per DIR (the lock is released when the script exits).
lock_dir() {
    exec 9>"$DIR/.lock"
    flock 9
}

has_cluster() {
    [[ -f "$DATA/PG_VERSION" ]]
}

is_running() {
    has_cluster || return 1
    as_owner "$PG_BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

# Port of the running postmaster (line 4 of postmaster.pid), else the recorded one.
current_port() {
    local p=""
    if [[ -r "$DATA/postmaster.pid" ]]; then
        p="$(sed -n '4p' "$DATA/postmaster.pid" 2>/dev/null || true)"
    fi
    if [[ -z "$p" && -r "$PORT_FILE" ]]; then
        p="$(tr -d '[:space:]' <"$PORT_FILE")"
    fi
    printf '%s\n' "$p"
}

url_for_port() {
    printf 'postgres://%s@127.0.0.1:%s/postgres\n' "$PG_SUPERUSER" "$1"
}

write_settings() {
    local port="$1"
    {
        echo "# Written by scripts/pg.sh on every start; edits are overwritten."
        echo "listen_addresses = '127.0.0.1'"
        echo "port = $port"
        echo "unix_socket_directories = '$SOCKET_DIR'"
        echo "max_connections = 400"
        echo "shared_buffers = 256MB"
        if [[ "${OPLEDGER_PG_FAST:-0}" == "1" ]]; then
            echo "# OPLEDGER_PG_FAST=1: throwaway test cluster, durability traded for speed."
            echo "fsync = off"
            echo "synchronous_commit = off"
            echo "full_page_writes = off"
        fi
    } >"$DATA/opledger.conf"
    is_root && chown "$PG_OS_USER:" "$DATA/opledger.conf"
    return 0
}

init_cluster() {
    log "creating a PostgreSQL cluster in $DATA"
    # Trust authentication (no password) on loopback and the local socket is acceptable ONLY
    # because this cluster is a throwaway one under a project-local folder, listening on
    # 127.0.0.1 alone; never use these settings for a shared or long-lived server.
    as_owner "$PG_BIN/initdb" -D "$DATA" --auth=trust --username="$PG_SUPERUSER" \
        --encoding=UTF8 --locale=C >"$DIR/log/initdb.log" 2>&1 || {
        tail -n 30 "$DIR/log/initdb.log" >&2 || true
        die "initdb failed (log: $DIR/log/initdb.log)"
    }
    echo "include_if_exists = 'opledger.conf'" >>"$DATA/postgresql.conf"
}

# --- subcommands -----------------------------------------------------------------------------

cmd_start() {
    set_dir "${1:-}"
    local want_port="${2:-}"
    if [[ -n "$want_port" && ! "$want_port" =~ ^[0-9]+$ ]]; then
        die "PORT must be a number, got '$want_port'"
    fi
    mkdir -p "$DIR/log" "$SOCKET_DIR"
    touch "$DIR/.opledger-pg"
    lock_dir
    prepare_ownership

    has_cluster || init_cluster

    if is_running; then
        local running_port
        running_port="$(current_port)"
        if [[ -n "$want_port" && "$want_port" != "$running_port" ]]; then
            die "the cluster in $DIR already runs on port $running_port, not $want_port: stop it first"
        fi
        log "already running on port $running_port"
        url_for_port "$running_port"
        return 0
    fi

    # Not running: a postmaster.pid left by a crash or a killed session is stale.
    rm -f "$DATA/postmaster.pid"

    local port="$want_port"
    if [[ -z "$port" && -r "$PORT_FILE" ]]; then
        port="$(tr -d '[:space:]' <"$PORT_FILE")"
        if [[ -n "$port" ]] && port_in_use "$port"; then
            log "recorded port $port is taken by another program: picking a new one"
            port=""
        fi
    fi
    [[ -n "$port" ]] || port="$(pick_free_port)"
    printf '%s\n' "$port" >"$PORT_FILE"

    write_settings "$port"
    touch "$LOGFILE"
    is_root && chown "$PG_OS_USER:" "$LOGFILE" "$PORT_FILE"

    log "starting PostgreSQL on 127.0.0.1:$port (log: $LOGFILE)"
    as_owner "$PG_BIN/pg_ctl" -D "$DATA" -l "$LOGFILE" -W start >&2 || {
        tail -n 40 "$LOGFILE" >&2 || true
        die "pg_ctl start failed"
    }

    local deadline=$((SECONDS + START_TIMEOUT_SECS)) started=$SECONDS
    until "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$port" -U "$PG_SUPERUSER" -d postgres; do
        if ((SECONDS >= deadline)); then
            log "PostgreSQL did not become ready within ${START_TIMEOUT_SECS}s; last lines of $LOGFILE:"
            tail -n 40 "$LOGFILE" >&2 || true
            die "PostgreSQL failed to start in $DIR"
        fi
        if ((SECONDS - started >= 2)) && ! is_running; then
            log "PostgreSQL exited during startup; last lines of $LOGFILE:"
            tail -n 40 "$LOGFILE" >&2 || true
            die "PostgreSQL failed to start in $DIR"
        fi
        sleep 0.2
    done
    log "ready"
    url_for_port "$port"
}

cmd_stop() {
    set_dir "${1:-}"
    [[ -d "$DIR" ]] || return 0
    has_cluster || return 0
    lock_dir
    if is_running; then
        log "stopping PostgreSQL in $DIR"
        as_owner "$PG_BIN/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >&2 ||
            as_owner "$PG_BIN/pg_ctl" -D "$DATA" -m immediate -w -t 30 stop >&2 ||
            die "could not stop PostgreSQL in $DIR"
    fi
}

cmd_url() {
    set_dir "${1:-}"
    is_running || die "no PostgreSQL cluster is running in $DIR"
    url_for_port "$(current_port)"
}

cmd_destroy() {
    set_dir "${1:-}"
    if [[ -d "$DIR" ]]; then
        if [[ ! -e "$DIR/.opledger-pg" && -n "$(ls -A "$DIR")" ]]; then
            die "refusing to remove $DIR: it is not empty and was not made by pg.sh"
        fi
        cmd_stop "$DIR"
        log "removing $DIR"
        rm -rf "$DIR"
    fi
    if [[ "$SOCKET_DIR" != "$DIR/"* && -d "$SOCKET_DIR" ]]; then
        rm -rf "$SOCKET_DIR"
    fi
}

main() {
    local cmd="${1:-}"
    [[ $# -gt 0 ]] && shift
    case "$cmd" in
        ensure-installed)
            ensure_installed
            ;;
        start | stop | url | destroy)
            PG_BIN="$(ensure_installed)"
            "cmd_$cmd" "$@"
            ;;
        -h | --help | help | "")
            usage
            ;;
        *)
            log "unknown subcommand '$cmd'"
            usage
            ;;
    esac
}

main "$@"
