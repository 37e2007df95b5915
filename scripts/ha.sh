#!/usr/bin/env bash
# A throwaway highly available PostgreSQL for tests and the dev stack: one etcd member, two
# PostgreSQL nodes managed by Patroni (a primary and a synchronous standby, synchronous_mode_strict)
# and HAProxy in front of them routing every connection to the current primary (Patroni's REST
# GET /primary answers 200 on the leader only).
#
#   ha.sh ensure-installed      find (or apt-get install) PostgreSQL, etcd-server, patroni and
#                               haproxy; print PostgreSQL's bin dir
#   ha.sh start DIR             create the topology in DIR if needed, start it (idempotent), wait
#                               for a leader, a synchronous standby and a committed write through
#                               the router; print the URL services use:
#                               postgres://opledger_admin@127.0.0.1:PORT/postgres (PORT: HAProxy)
#   ha.sh url DIR               print that URL of the running topology in DIR
#   ha.sh status DIR            print one line per node: name role state postgres-port (stdout)
#   ha.sh leader DIR            print the current leader's node name
#   ha.sh switchover DIR        planned switchover to the synchronous standby; waits until the
#                               router reaches the new leader and a write commits; prints its name
#   ha.sh kill-primary DIR      SIGKILL of the leader's postmaster (Patroni itself stays up and,
#                               with primary_start_timeout 0, fails over at once); prints the
#                               killed node's name and returns without waiting
#   ha.sh wait-writable DIR [SECS]  wait until a write commits through the router (default 60 s)
#   ha.sh stop DIR              stop HAProxy, both Patronis (and their PostgreSQLs) and etcd
#   ha.sh destroy DIR           kill everything of DIR at once (no clean shutdown) and remove DIR
#
# Environment:
#   OPLEDGER_PG_FAST=1          (start) fsync off on both nodes: tests only. synchronous_commit
#                               stays on (a commit is acknowledged only once the standby has it)
#                               and full_page_writes stays on (pg_rewind needs it).
#
# Layout of DIR: ports.env (every port, picked free at creation), etcd/ (data, log), node0/ and
# node1/ (patroni.yml, data/ = PGDATA, patroni.log), haproxy.cfg, *.pid, .opledger-ha (marker:
# destroy refuses to remove a non-empty folder without it). As root, every daemon runs as the
# unprivileged `postgres` user (PostgreSQL refuses root), exactly as scripts/pg.sh runs it.
#
# Only stdout carries results; every diagnostic goes to stderr.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export OPLEDGER_LOG_PREFIX="ha.sh"

PG_SUPERUSER="opledger_admin"
PG_OS_USER="postgres"
SCOPE="opledger"
NODES=(node0 node1)
START_TIMEOUT_SECS=90
# Patroni's timing: a dead primary is noticed within a loop (1 s); its leader key expires after
# ttl when the whole node is gone.
PATRONI_TTL=10
PATRONI_LOOP_WAIT=1
PATRONI_RETRY_TIMEOUT=3

usage() {
    sed -n '2,35p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# --- finding / installing --------------------------------------------------------------------

apt_install() {
    local sudo=()
    if ! is_root; then
        command -v sudo >/dev/null 2>&1 ||
            die "$* not installed and this is not root: install them (apt-get install -y $*)"
        sudo=(sudo)
    fi
    "${sudo[@]+"${sudo[@]}"}" env DEBIAN_FRONTEND=noninteractive apt-get update >&2
    "${sudo[@]+"${sudo[@]}"}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends "$@" >&2
}

ensure_installed() {
    local pg_bin missing=()
    pg_bin="$(bash "$OPLEDGER_REPO_ROOT/scripts/pg.sh" ensure-installed)"
    command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
    command -v patroni >/dev/null 2>&1 || missing+=(patroni)
    command -v haproxy >/dev/null 2>&1 || [[ -x /usr/sbin/haproxy ]] || missing+=(haproxy)
    command -v curl >/dev/null 2>&1 || missing+=(curl)
    if ((${#missing[@]} > 0)); then
        log "installing with apt-get: ${missing[*]}"
        apt_install "${missing[@]}"
    fi
    for tool in etcd patroni patronictl curl; do
        command -v "$tool" >/dev/null 2>&1 || die "$tool is missing after installation"
    done
    [[ -x "$pg_bin/pg_rewind" ]] || die "$pg_bin/pg_rewind is missing"
    printf '%s\n' "$pg_bin"
}

haproxy_bin() {
    command -v haproxy 2>/dev/null || printf '/usr/sbin/haproxy\n'
}

# --- running as the topology's owner ---------------------------------------------------------


# Starts a daemon as the owner in its own session: PIDFILE gets the daemon's own pid (the shell
# writes its pid, then execs the command), LOGFILE its output.
start_daemon() {
    local pidfile="$1" logfile="$2" name="$3"
    shift 2
    rm -f "$pidfile"
    touch "$logfile"
    is_root && chown "$PG_OS_USER:" "$logfile"
    local runner=()
    is_root && runner=(runuser -u "$PG_OS_USER" --)
    # fd 9 (the lock on DIR) is closed so that the daemon does not keep it.
    # shellcheck disable=SC2016 # expanded by the inner shell
    (cd "$DIR" && exec "${runner[@]+"${runner[@]}"}" setsid sh -c 'echo $$ >"$0"; exec "$@"' \
        "$pidfile" "$@") >>"$logfile" 2>&1 </dev/null 9>&- &
    local deadline=$((SECONDS + 10))
    until [[ -s "$pidfile" ]]; do
        ((SECONDS < deadline)) || die "$name did not start (log: $logfile)"
        sleep 0.05
    done
}

pid_alive() {
    local pidfile="$1" pid
    [[ -s "$pidfile" ]] || return 1
    pid="$(tr -d '[:space:]' <"$pidfile")"
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null
}

# SIGTERM the daemon of PIDFILE, wait up to SECS, then SIGKILL.
stop_daemon() {
    local pidfile="$1" secs="${2:-30}" pid
    pid_alive "$pidfile" || {
        rm -f "$pidfile"
        return 0
    }
    pid="$(tr -d '[:space:]' <"$pidfile")"
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + secs))
    while kill -0 "$pid" 2>/dev/null; do
        if ((SECONDS >= deadline)); then
            log "pid $pid did not stop within ${secs}s: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.1
    done
    rm -f "$pidfile"
}

# --- layout ----------------------------------------------------------------------------------

set_dir() {
    [[ -n "${1:-}" ]] || usage
    DIR="$(abs_path "$1")"
    PORTS_FILE="$DIR/ports.env"
}

lock_dir() {
    exec 9>"$DIR/.lock"
    flock 9
}

has_topology() {
    [[ -s "$PORTS_FILE" ]]
}

load_ports() {
    has_topology || die "no HA topology in $DIR (run: ha.sh start $DIR)"
    # shellcheck disable=SC1090
    source "$PORTS_FILE"
}

# Picks every port once, when the topology is created: Patroni keeps each member's address in
# etcd, so the ports are the topology's identity.
write_ports() {
    local taken=" " name port
    {
        for name in ETCD_CLIENT_PORT ETCD_PEER_PORT PROXY_PORT REST_PORT_0 REST_PORT_1 PG_PORT_0 PG_PORT_1; do
            port="$(pick_free_port)"
            while [[ "$taken" == *" $port "* ]]; do
                port="$(pick_free_port)"
            done
            taken="$taken$port "
            printf '%s=%s\n' "$name" "$port"
        done
    } >"$PORTS_FILE"
}

url_for_port() {
    printf 'postgres://%s@127.0.0.1:%s/postgres\n' "$PG_SUPERUSER" "$1"
}

rest_port() {
    local var="REST_PORT_$1"
    printf '%s\n' "${!var}"
}

pg_port() {
    local var="PG_PORT_$1"
    printf '%s\n' "${!var}"
}

node_index() {
    local i
    for i in "${!NODES[@]}"; do
        [[ "${NODES[$i]}" == "$1" ]] && {
            printf '%s\n' "$i"
            return 0
        }
    done
    return 1
}

# --- configuration ---------------------------------------------------------------------------

write_patroni_config() {
    local i="$1" node="${NODES[$1]}" fsync=on
    [[ "${OPLEDGER_PG_FAST:-0}" == "1" ]] && fsync=off
    local rest pg
    rest="$(rest_port "$i")"
    pg="$(pg_port "$i")"
    mkdir -p "$DIR/$node"
    # Trust authentication on loopback only: a throwaway topology under a project-local folder,
    # listening on 127.0.0.1 alone (the same rule as scripts/pg.sh); never for a shared server.
    cat >"$DIR/$node/patroni.yml" <<YAML
# Written by scripts/ha.sh on every start; edits are overwritten.
scope: $SCOPE
name: $node
log:
  level: INFO
restapi:
  listen: 127.0.0.1:$rest
  connect_address: 127.0.0.1:$rest
etcd3:
  hosts: 127.0.0.1:$ETCD_CLIENT_PORT
bootstrap:
  dcs:
    ttl: $PATRONI_TTL
    loop_wait: $PATRONI_LOOP_WAIT
    retry_timeout: $PATRONI_RETRY_TIMEOUT
    maximum_lag_on_failover: 0
    # A crashed primary is failed over at once instead of being restarted in place.
    primary_start_timeout: 0
    # Commits wait for the synchronous standby; with strict mode writes stop rather than
    # continue unreplicated when no standby is there.
    synchronous_mode: true
    synchronous_mode_strict: true
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        wal_log_hints: "on"
        full_page_writes: "on"
        synchronous_commit: "on"
        fsync: "$fsync"
        max_connections: 400
        max_wal_senders: 10
        max_replication_slots: 10
        wal_keep_size: 256MB
        shared_buffers: 128MB
  initdb:
    - encoding: UTF8
    - locale: C
    - auth: trust
postgresql:
  listen: 127.0.0.1:$pg
  connect_address: 127.0.0.1:$pg
  data_dir: $DIR/$node/data
  bin_dir: $PG_BIN
  pgpass: $DIR/$node/pgpass
  use_unix_socket: false
  authentication:
    superuser:
      username: $PG_SUPERUSER
    replication:
      username: opledger_replicator
  parameters:
    unix_socket_directories: ''
  pg_hba:
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
YAML
    is_root && chown -R "$PG_OS_USER:" "$DIR/$node"
    return 0
}

write_haproxy_config() {
    {
        echo "# Written by scripts/ha.sh on every start; edits are overwritten."
        echo "global"
        echo "    maxconn 2000"
        echo "defaults"
        echo "    mode tcp"
        echo "    timeout connect 1s"
        # Longer than any pool keeps an idle connection.
        echo "    timeout client 1h"
        echo "    timeout server 1h"
        echo "    timeout check 1s"
        echo "listen primary"
        echo "    bind 127.0.0.1:$PROXY_PORT"
        # The leader alone answers 200 on /primary (OPTIONS: a status without a body, which
        # HAProxy may close early); a node marked down has its sessions cut,
        # so no connection outlives its primary.
        echo "    option httpchk OPTIONS /primary"
        echo "    http-check expect status 200"
        echo "    default-server inter 250ms fall 2 rise 1 on-marked-down shutdown-sessions"
        local i
        for i in "${!NODES[@]}"; do
            echo "    server ${NODES[$i]} 127.0.0.1:$(pg_port "$i") maxconn 1000 check port $(rest_port "$i")"
        done
    } >"$DIR/haproxy.cfg"
    is_root && chown "$PG_OS_USER:" "$DIR/haproxy.cfg"
    return 0
}

# --- state -----------------------------------------------------------------------------------

# The cluster as Patroni's REST API of any running node sees it (JSON), or nothing.
cluster_json() {
    local i
    for i in "${!NODES[@]}"; do
        curl -fsS --max-time 2 "http://127.0.0.1:$(rest_port "$i")/cluster" 2>/dev/null && return 0
    done
    return 1
}

# "name role state port" per member.
members() {
    cluster_json | python3 -c '
import json, sys
for m in json.load(sys.stdin).get("members", []):
    print(m.get("name"), m.get("role"), m.get("state"), m.get("port"))
'
}

current_leader() {
    members 2>/dev/null | awk '$2 == "leader" && $3 == "running" { print $1; exit }'
}

sync_standby() {
    members 2>/dev/null | awk '$2 == "sync_standby" && ($3 == "streaming" || $3 == "running") { print $1; exit }'
}

# True once a transaction commits through the router within 5 s (a commit waits for the
# synchronous standby, so this is false while none is attached).
writable() {
    timeout 5 "$PG_BIN/psql" "$(url_for_port "$PROXY_PORT")" -XAtqc "SELECT txid_current()" \
        >/dev/null 2>&1
}

wait_writable() {
    local secs="$1" started=$SECONDS
    local deadline=$((SECONDS + secs))
    until [[ -n "$(sync_standby)" ]] && writable; do
        if ((SECONDS >= deadline)); then
            members >&2 || true
            die "no write committed through the router within ${secs}s"
        fi
        sleep 0.2
    done
    log "writable through 127.0.0.1:$PROXY_PORT after $((SECONDS - started))s (leader $(current_leader), sync standby $(sync_standby))"
}

# --- subcommands -----------------------------------------------------------------------------

cmd_start() {
    set_dir "${1:-}"
    mkdir -p "$DIR/etcd"
    touch "$DIR/.opledger-ha"
    lock_dir
    if is_root; then
        id -u "$PG_OS_USER" >/dev/null 2>&1 ||
            die "running as root but there is no '$PG_OS_USER' system user to run PostgreSQL as (it comes with Debian's postgresql package)"
        runuser -u "$PG_OS_USER" -- test -x "$DIR" ||
            die "the '$PG_OS_USER' user cannot reach $DIR: allow it (chmod o+x on its parents) or put the topology elsewhere"
    fi
    has_topology || write_ports
    load_ports
    is_root && chown "$PG_OS_USER:" "$DIR" "$DIR/etcd"

    if ! pid_alive "$DIR/etcd.pid"; then
        log "starting etcd on 127.0.0.1:$ETCD_CLIENT_PORT"
        # --enable-v2: Patroni 3.0's etcd3 client talks to etcd 3.4 through its gRPC gateway,
        # and checks the v2 endpoints first.
        start_daemon "$DIR/etcd.pid" "$DIR/etcd/etcd.log" etcd --name ha \
            --data-dir "$DIR/etcd/data" --enable-v2 --log-level warn --logger zap \
            --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
            --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
            --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
            --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
            --initial-cluster "ha=http://127.0.0.1:$ETCD_PEER_PORT"
    fi
    local deadline=$((SECONDS + 30))
    until curl -fsS --max-time 1 "http://127.0.0.1:$ETCD_CLIENT_PORT/health" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || {
            tail -n 20 "$DIR/etcd/etcd.log" >&2 || true
            die "etcd did not become healthy"
        }
        sleep 0.1
    done

    local i node
    for i in "${!NODES[@]}"; do
        node="${NODES[$i]}"
        write_patroni_config "$i"
        if ! pid_alive "$DIR/$node/patroni.pid"; then
            # A postmaster left by a killed Patroni would block the port: stop it first.
            if [[ -s "$DIR/$node/data/postmaster.pid" ]]; then
                as_owner "$PG_BIN/pg_ctl" -D "$DIR/$node/data" -m immediate -w -t 10 stop \
                    >/dev/null 2>&1 || true
            fi
            log "starting Patroni $node (PostgreSQL on 127.0.0.1:$(pg_port "$i"), REST on :$(rest_port "$i"))"
            start_daemon "$DIR/$node/patroni.pid" "$DIR/$node/patroni.log" \
                patroni "$DIR/$node/patroni.yml"
        fi
    done

    write_haproxy_config
    if ! pid_alive "$DIR/haproxy.pid"; then
        log "starting HAProxy on 127.0.0.1:$PROXY_PORT"
        start_daemon "$DIR/haproxy.pid" "$DIR/haproxy.log" "$(haproxy_bin)" -db -f "$DIR/haproxy.cfg"
    fi

    deadline=$((SECONDS + START_TIMEOUT_SECS))
    until [[ -n "$(current_leader)" && -n "$(sync_standby)" ]]; do
        if ((SECONDS >= deadline)); then
            members >&2 || true
            for node in "${NODES[@]}"; do
                log "last lines of $DIR/$node/patroni.log:"
                tail -n 20 "$DIR/$node/patroni.log" >&2 || true
            done
            die "no leader with a synchronous standby within ${START_TIMEOUT_SECS}s"
        fi
        for node in "${NODES[@]}"; do
            pid_alive "$DIR/$node/patroni.pid" || {
                tail -n 30 "$DIR/$node/patroni.log" >&2 || true
                die "Patroni $node exited"
            }
        done
        sleep 0.3
    done
    wait_writable $((deadline - SECONDS > 5 ? deadline - SECONDS : 5))
    url_for_port "$PROXY_PORT"
}

cmd_url() {
    set_dir "${1:-}"
    load_ports
    pid_alive "$DIR/haproxy.pid" || die "the router of $DIR is not running"
    url_for_port "$PROXY_PORT"
}

cmd_status() {
    set_dir "${1:-}"
    load_ports
    members || die "no Patroni of $DIR answers"
}

cmd_leader() {
    set_dir "${1:-}"
    load_ports
    local leader
    leader="$(current_leader)"
    [[ -n "$leader" ]] || die "no running leader"
    printf '%s\n' "$leader"
}

cmd_wait_writable() {
    set_dir "${1:-}"
    load_ports
    wait_writable "${2:-60}"
}

cmd_switchover() {
    set_dir "${1:-}"
    load_ports
    local leader candidate i
    leader="$(current_leader)"
    candidate="$(sync_standby)"
    [[ -n "$leader" && -n "$candidate" ]] ||
        die "a switchover needs a leader and a synchronous standby"
    i="$(node_index "$leader")"
    log "switchover from $leader to $candidate"
    curl -fsS --max-time 30 -X POST -H 'Content-Type: application/json' \
        -d "{\"leader\": \"$leader\", \"candidate\": \"$candidate\"}" \
        "http://127.0.0.1:$(rest_port "$i")/switchover" >&2 ||
        die "Patroni refused the switchover"
    echo >&2
    local deadline=$((SECONDS + 60))
    until [[ "$(current_leader)" == "$candidate" ]]; do
        ((SECONDS < deadline)) || die "$candidate did not become the leader within 60s"
        sleep 0.2
    done
    wait_writable 60
    printf '%s\n' "$candidate"
}

cmd_kill_primary() {
    set_dir "${1:-}"
    load_ports
    local leader pid
    leader="$(current_leader)"
    [[ -n "$leader" ]] || die "no running leader to kill"
    pid="$(sed -n '1p' "$DIR/$leader/data/postmaster.pid" 2>/dev/null || true)"
    [[ "$pid" =~ ^[0-9]+$ ]] || die "no postmaster pid for $leader"
    log "SIGKILL of $leader's postmaster (pid $pid)"
    kill -KILL "$pid"
    printf '%s\n' "$leader"
}

cmd_stop() {
    set_dir "${1:-}"
    [[ -d "$DIR" ]] || return 0
    has_topology || return 0
    lock_dir
    load_ports
    stop_daemon "$DIR/haproxy.pid" 10
    local node
    # Patroni stops its PostgreSQL on SIGTERM (fast shutdown).
    for node in "${NODES[@]}"; do
        stop_daemon "$DIR/$node/patroni.pid" 60
    done
    for node in "${NODES[@]}"; do
        if [[ -s "$DIR/$node/data/postmaster.pid" ]]; then
            as_owner "$PG_BIN/pg_ctl" -D "$DIR/$node/data" -m immediate -w -t 10 stop \
                >/dev/null 2>&1 || true
        fi
    done
    stop_daemon "$DIR/etcd.pid" 10
}

cmd_destroy() {
    set_dir "${1:-}"
    [[ -d "$DIR" ]] || return 0
    if [[ ! -e "$DIR/.opledger-ha" && -n "$(ls -A "$DIR")" ]]; then
        die "refusing to remove $DIR: it is not empty and was not made by ha.sh"
    fi
    if has_topology; then
        lock_dir
        load_ports
        # Thrown away: no clean shutdown needed. Patroni first, so it restarts nothing.
        local pidfile node
        for pidfile in "$DIR/haproxy.pid" "$DIR"/node*/patroni.pid; do
            if pid_alive "$pidfile"; then
                kill -KILL "$(tr -d '[:space:]' <"$pidfile")" 2>/dev/null || true
            fi
        done
        for node in "${NODES[@]}"; do
            if [[ -s "$DIR/$node/data/postmaster.pid" ]]; then
                as_owner "$PG_BIN/pg_ctl" -D "$DIR/$node/data" -m immediate -w -t 10 stop \
                    >/dev/null 2>&1 || true
            fi
        done
        if pid_alive "$DIR/etcd.pid"; then
            kill -KILL "$(tr -d '[:space:]' <"$DIR/etcd.pid")" 2>/dev/null || true
        fi
    fi
    log "removing $DIR"
    rm -rf "$DIR"
}

main() {
    local cmd="${1:-}"
    [[ $# -gt 0 ]] && shift
    case "$cmd" in
        ensure-installed)
            ensure_installed
            ;;
        start | url | status | leader | switchover | stop | destroy)
            PG_BIN="$(ensure_installed)"
            "cmd_$cmd" "$@"
            ;;
        kill-primary | wait-writable)
            PG_BIN="$(ensure_installed)"
            "cmd_${cmd//-/_}" "$@"
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
