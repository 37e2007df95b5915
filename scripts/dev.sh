#!/usr/bin/env bash
# The dev stack: "the one command that runs the suite locally".
#
#   scripts/dev.sh            build, provision and run the suite in the foreground (Ctrl-C stops it)
#   scripts/dev.sh --release  the same with optimised binaries
#
# With OPLEDGER_DATABASE_URL unset it provisions a PostgreSQL cluster under .data/dev-pg (kept
# between runs, durable settings), creates the `opledger` database, applies migrations, creates
# the application login role, a demo tenant with client/approver/operator keys (written once to
# .data/dev/keys.env, mode 600: a dev convenience, never do this with real keys) and funds its
# `treasury` ETH account. Then it starts the operations service and prints how to call it.
#
# Environment:
#   OPLEDGER_DATABASE_URL     owner URL of an existing database to use instead of a local cluster
#   OPLEDGER_DEV_APP_URL      URL the service uses with OPLEDGER_DATABASE_URL (default: the same)
#   OPLEDGER_OPERATIONS_LISTEN  gRPC address (default 127.0.0.1:50051)
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export OPLEDGER_LOG_PREFIX="dev"
cd "$OPLEDGER_REPO_ROOT"

profile=debug
cargo_flags=()
if [[ "${1:-}" == "--release" ]]; then
    profile=release
    cargo_flags=(--release)
fi

log "building the workspace binaries ($profile)"
cargo build "${cargo_flags[@]}" -p opledger-operations -p opledger-admin >&2
bin="$OPLEDGER_REPO_ROOT/target/$profile"

state="$OPLEDGER_REPO_ROOT/.data/dev"
mkdir -p "$state"
chmod 700 "$state"

if [[ -n "${OPLEDGER_DATABASE_URL:-}" ]]; then
    owner_url="$OPLEDGER_DATABASE_URL"
    app_url="${OPLEDGER_DEV_APP_URL:-$OPLEDGER_DATABASE_URL}"
else
    bash scripts/pg.sh ensure-installed >/dev/null
    cluster_url="$(bash scripts/pg.sh start "$OPLEDGER_REPO_ROOT/.data/dev-pg")"
    server="${cluster_url%/*}"
    if ! psql "$cluster_url" -tAc "SELECT 1 FROM pg_database WHERE datname = 'opledger'" | grep -q 1; then
        log "creating database opledger"
        psql "$cluster_url" -qc "CREATE DATABASE opledger" >&2
    fi
    owner_url="$server/opledger"
    app_password_file="$state/app-password"
    if [[ ! -s "$app_password_file" ]]; then
        (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$app_password_file")
    fi
    app_password="$(cat "$app_password_file")"
    app_url="postgres://opledger_dev_app:${app_password}@${server#postgres://*@}/opledger"
fi

log "applying migrations"
"$bin/opledger-admin" --database-url "$owner_url" migrate >&2

if [[ -z "${OPLEDGER_DATABASE_URL:-}" ]]; then
    psql "$owner_url" -q >&2 <<SQL
DO \$\$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'opledger_dev_app') THEN
        CREATE ROLE opledger_dev_app LOGIN PASSWORD '${app_password}' IN ROLE opledger_app;
    END IF;
END
\$\$;
SQL
fi

keys="$state/keys.env"
if [[ ! -s "$keys" ]]; then
    log "creating the demo tenant and its keys"
    "$bin/opledger-admin" --database-url "$owner_url" tenant create demo >&2 || true
    (
        umask 077
        {
            echo "# demo tenant API keys, created $(date -u +%FT%TZ); shown once, kept here for dev only"
            for role in client approver operator; do
                echo "OPLEDGER_DEMO_${role^^}_KEY=$("$bin/opledger-admin" --database-url "$owner_url" key create --tenant demo --role "$role" --label dev)"
            done
        } >"$keys"
    )
fi
# Funding is idempotent by its key: re-running the dev stack does not credit again.
"$bin/opledger-admin" --database-url "$owner_url" credit --tenant demo --account treasury \
    --asset ETH --amount 1000000000000000000000 --key dev-stack-initial-funding-v1 >&2

listen="${OPLEDGER_OPERATIONS_LISTEN:-127.0.0.1:50051}"
# shellcheck disable=SC1090
source "$keys"
cat >&2 <<EOF2

opledger dev stack
  operations gRPC   $listen  (health and server reflection enabled)
  database          $owner_url
  demo keys         $keys

Call it, for example with grpcurl (reflection lists every method):
  grpcurl -plaintext -H "authorization: Bearer \$OPLEDGER_DEMO_CLIENT_KEY" $listen list opledger.v1.OperationsService
  grpcurl -plaintext -H "authorization: Bearer \$OPLEDGER_DEMO_CLIENT_KEY" \\
    -d '{"idempotency_key":"'\$(uuidgen)'","payload":{"source_account":"treasury","asset":"ETH","network":"anvil","destination":"0x70997970c51812dc3a010c7d01b50e0d17dc79c8","amount":"1000","fee_cap":"1000000000000000","policy_version":1}}' \\
    $listen opledger.v1.OperationsService/CreateWithdrawal
  grpcurl -plaintext -H "authorization: Bearer \$OPLEDGER_DEMO_CLIENT_KEY" \\
    -d '{"account":"treasury","asset":"ETH"}' $listen opledger.v1.OperationsService/GetBalance
(source $keys first; Ctrl-C stops the service and the local cluster)

EOF2

cleanup() {
    if [[ -z "${OPLEDGER_DATABASE_URL:-}" ]]; then
        bash scripts/pg.sh stop "$OPLEDGER_REPO_ROOT/.data/dev-pg" || true
    fi
}
trap cleanup EXIT
OPLEDGER_OPERATIONS_DATABASE_URL="$app_url" OPLEDGER_OPERATIONS_LISTEN="$listen" \
    "$bin/opledger-operations" &
service_pid=$!
trap 'kill -TERM "$service_pid" 2>/dev/null || true' INT TERM
wait "$service_pid" || true
