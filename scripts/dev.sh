#!/usr/bin/env bash
# The dev stack: "the one command that runs the suite locally".
#
#   scripts/dev.sh            build, provision and run the suite in the foreground (Ctrl-C stops it)
#   scripts/dev.sh --release  the same with optimised binaries
#   scripts/dev.sh --ha       on a highly available database instead of the single cluster:
#                             scripts/ha.sh in .data/dev-ha (etcd, a Patroni primary and a
#                             synchronous standby, HAProxy in front; `bash scripts/ha.sh
#                             switchover .data/dev-ha` or `kill-primary` fails it over live);
#                             its keys, tokens and chain state are kept in .data/dev-ha-state
#
# With OPLEDGER_DATABASE_URL unset it provisions a PostgreSQL cluster under .data/dev-pg (kept
# between runs, durable settings), creates the `opledger` database, applies migrations, creates
# the application login role, a demo tenant with client/approver/operator keys (written once to
# .data/dev/keys.env, mode 600: a dev convenience, never do this with real keys) and funds its
# `treasury` ETH account, the inbox's body key and a webhook endpoint with its secret, a signer
# database role, a demo tenant administrator key and a demo approver signing key (Ed25519, each in
# its own mode-600 file under .data/dev, written once; the signer pins the administrator's public
# key in [[trust_roots]]) with the demo tenant's trust statement v1 registering the approver key
# (published once), a demo hot wallet keystore (anvil's first PUBLIC dev key, light KDF: development
# only) and signer caller tokens. Then it starts anvil (pinned npm package, 1 s blocks, state kept
# in .data/dev), the operations, approvals, signer, broadcaster, reconciler, witness and inbox
# services, and prints how to call them. The witness (the second principal of every release of a
# signed withdrawal's hold) has its own login in opledger_witness and its own [evidence]
# endpoints: here the same anvil node as the reconciler's, quorum 1, the same confirmations.
#
# The custodian path: a second tenant, `demo-custodian` (its API keys in keys.env, the same
# administrator, approver and operator keys as the demo tenant's), whose withdrawals on anvil the
# operations service routes to a custodian ([[custodian_routes]]). The conformance double
# (opledger-custodian-sim, Fireblocks profile) plays the provider on 127.0.0.1:8089, paying from
# its own hot wallet on the dev anvil (anvil's 9th PUBLIC dev key); its RSA API key pair is made
# with openssl at the first start under .data/dev/custodian (mode 600, never committed). The
# custodian executor runs with its own login in opledger_custodian, its own copy of the
# credentials and the anvil node as its evidence (no unwatched network); the witness attests its
# releases from its own lookups with its own copy ([[custodian_accounts]]). The double keeps its
# records in memory: a withdrawal still in flight when the stack stops is looked up in vain after
# a restart and sent again under the same reference, which the restarted double pays again on the
# dev chain (development only; a real provider keeps its records).
#
# Environment:
#   OPLEDGER_DEV_HA=1         the same as --ha
#   OPLEDGER_DATABASE_URL     owner URL of an existing database to use instead of a local cluster
#   OPLEDGER_DEV_APP_URL      URL the service uses with OPLEDGER_DATABASE_URL (default: the same)
#   OPLEDGER_OPERATIONS_LISTEN  gRPC address (default 127.0.0.1:15051)
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export OPLEDGER_LOG_PREFIX="dev"
cd "$OPLEDGER_REPO_ROOT"

profile=debug
cargo_flags=()
ha="${OPLEDGER_DEV_HA:-0}"
for arg in "$@"; do
    case "$arg" in
        --release)
            profile=release
            cargo_flags=(--release)
            ;;
        --ha) ha=1 ;;
        *) die "unknown option '$arg' (options: --release, --ha)" ;;
    esac
done

log "building the workspace binaries ($profile)"
cargo build "${cargo_flags[@]}" -p opledger-operations -p opledger-approvals -p opledger-signer \
    -p opledger-broadcaster -p opledger-reconciler -p opledger-witness -p opledger-inbox \
    -p opledger-custodian-executor -p opledger-custodian-sim -p opledger-admin -p opledger-opctl >&2
bin="$OPLEDGER_REPO_ROOT/target/$profile"

# The stack's keys, tokens and chain state belong to its database: the HA stack keeps its own
# (a fresh HA database with the single cluster's keys would have no demo tenant, and a chain
# state whose hot wallet nonces it never allocated).
if [[ "$ha" == 1 && -z "${OPLEDGER_DATABASE_URL:-}" ]]; then
    state="$OPLEDGER_REPO_ROOT/.data/dev-ha-state"
else
    state="$OPLEDGER_REPO_ROOT/.data/dev"
fi
mkdir -p "$state"
chmod 700 "$state"

if [[ -n "${OPLEDGER_DATABASE_URL:-}" ]]; then
    owner_url="$OPLEDGER_DATABASE_URL"
    app_url="${OPLEDGER_DEV_APP_URL:-$OPLEDGER_DATABASE_URL}"
    for service in operations approvals broadcaster reconciler witness inbox custodian; do
        printf -v "${service}_url" '%s' "$app_url"
    done
else
    if [[ "$ha" == 1 ]]; then
        # A Patroni primary with a synchronous standby behind HAProxy (kept between runs);
        # every service reaches the current primary through the router's one URL.
        bash scripts/ha.sh ensure-installed >/dev/null
        cluster_url="$(bash scripts/ha.sh start "$OPLEDGER_REPO_ROOT/.data/dev-ha")"
    else
        bash scripts/pg.sh ensure-installed >/dev/null
        cluster_url="$(bash scripts/pg.sh start "$OPLEDGER_REPO_ROOT/.data/dev-pg")"
    fi
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
    # One login per service, each a member of its own service role only (least privilege).
    for service in operations approvals broadcaster reconciler witness inbox custodian; do
        printf -v "${service}_url" '%s' \
            "postgres://opledger_dev_${service}:${app_password}@${server#postgres://*@}/opledger"
    done
    signer_url="postgres://opledger_dev_signer:${app_password}@${server#postgres://*@}/opledger"
fi

log "applying migrations"
"$bin/opledger-admin" --database-url "$owner_url" migrate >&2

if [[ -z "${OPLEDGER_DATABASE_URL:-}" ]]; then
    psql "$owner_url" -q >&2 <<SQL
DO \$\$
DECLARE service text;
BEGIN
    FOREACH service IN ARRAY ARRAY['operations', 'approvals', 'broadcaster', 'reconciler', 'witness', 'inbox', 'custodian'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'opledger_dev_' || service) THEN
            EXECUTE format('CREATE ROLE %I LOGIN PASSWORD %L IN ROLE %I',
                'opledger_dev_' || service, '${app_password}', 'opledger_' || service);
        END IF;
    END LOOP;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'opledger_dev_signer') THEN
        CREATE ROLE opledger_dev_signer LOGIN PASSWORD '${app_password}' IN ROLE opledger_signer;
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
# The second tenant, whose withdrawals on anvil the custodian executor sends to the double.
if ! grep -q '^OPLEDGER_CUSTODY_CLIENT_KEY=' "$keys"; then
    log "creating the demo-custodian tenant and its keys"
    "$bin/opledger-admin" --database-url "$owner_url" tenant create demo-custodian >&2 || true
    (
        umask 077
        {
            echo "# demo-custodian tenant API keys (its withdrawals go through the custodian executor)"
            for role in client approver; do
                echo "OPLEDGER_CUSTODY_${role^^}_KEY=$("$bin/opledger-admin" --database-url "$owner_url" key create --tenant demo-custodian --role "$role" --label dev)"
            done
        } >>"$keys"
    )
fi
# Funding is idempotent by its key: re-running the dev stack does not credit again.
"$bin/opledger-admin" --database-url "$owner_url" credit --tenant demo --account treasury \
    --asset ETH --amount 1000000000000000000000 --key dev-stack-initial-funding-v1 >&2
"$bin/opledger-admin" --database-url "$owner_url" credit --tenant demo-custodian \
    --account treasury --asset ETH --amount 1000000000000000000000 \
    --key dev-stack-custodian-funding-v1 >&2

listen="${OPLEDGER_OPERATIONS_LISTEN:-127.0.0.1:15051}"
approvals_listen="127.0.0.1:15052"
signer_listen="127.0.0.1:15053"
broadcaster_listen="127.0.0.1:15054"
reconciler_listen="127.0.0.1:15055"
inbox_listen="127.0.0.1:15056"
witness_listen="127.0.0.1:15057"
custodian_listen="127.0.0.1:15058"
sim_listen="127.0.0.1:8089"
# The double's hot wallet: anvil's 9th dev key, which is PUBLIC (no other dev sender uses it).
sim_wallet_key="0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97"
inbox_http="127.0.0.1:8088"
anvil_port="${OPLEDGER_DEV_ANVIL_PORT:-8545}"
anvil_url="http://127.0.0.1:$anvil_port"
# Blocks an inclusion needs before the chain-facing services call it final (1 s blocks). Below
# the default floor of 12 (min_confirmations), so their [evidence.anvil] says
# allow_shallow_finality = true: development only, they warn at start.
dev_confirmations=2
# The evidence section of every service that reads anvil's chain (the broadcaster, the reconciler,
# the witness and the custodian executor, each from its own configuration).
anvil_evidence="[evidence.anvil]
urls = [\"$anvil_url\"]
chain_id = 31337
quorum = 1
confirmations = $dev_confirmations
allow_shallow_finality = true"
if ! grep -q '^OPLEDGER_DEMO_SIGNER_TOKEN=' "$keys"; then
    echo "OPLEDGER_DEMO_SIGNER_TOKEN=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" >>"$keys"
fi
# The reconciler's own signer caller token (cancels only); the one above is the broadcaster's.
if ! grep -q '^OPLEDGER_DEMO_RECONCILER_SIGNER_TOKEN=' "$keys"; then
    echo "OPLEDGER_DEMO_RECONCILER_SIGNER_TOKEN=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" >>"$keys"
fi
if ! grep -q '^OPLEDGER_INBOX_BODY_KEYS=' "$keys"; then
    # The inbox's body-encryption key (id 1): seals raw webhook bodies and endpoint secrets.
    echo "OPLEDGER_INBOX_BODY_KEYS=1:$(head -c 32 /dev/urandom | base64 -w0)" >>"$keys"
fi
# shellcheck disable=SC1090
source "$keys"
export OPLEDGER_INBOX_BODY_KEYS
if ! grep -q '^OPLEDGER_DEMO_WEBHOOK_PATH=' "$keys"; then
    log "creating the demo webhook endpoint"
    created="$("$bin/opledger-admin" --database-url "$owner_url" --json webhook create-endpoint \
        --tenant demo --source custodian --types deposit.confirmed,transfer.status,kyt.result)"
    {
        echo "OPLEDGER_DEMO_WEBHOOK_PATH=$(sed -E 's/.*"path":"([^"]+)".*/\1/' <<<"$created")"
        echo "OPLEDGER_DEMO_WEBHOOK_SECRET=$(sed -E 's/.*"secret":"([^"]+)".*/\1/' <<<"$created")"
    } >>"$keys"
    # shellcheck disable=SC1090
    source "$keys"
fi

# The demo hot wallet: anvil's first dev key, which is PUBLIC. Development only.
hot="$state/hot.json"
if [[ ! -s "$hot" ]]; then
    (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$state/hot.pass")
    secret_file="$state/hot.secret"
    (umask 077 && echo "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80" >"$secret_file")
    "$bin/opledger-admin" keystore import --secret-file "$secret_file" --out "$hot" \
        --passphrase-file "$state/hot.pass" --kdf light >&2
    rm -f "$secret_file"
fi
tenant_id="$(psql "$owner_url" -tAc "SELECT tenant_id FROM tenants WHERE name = 'demo'")"
if ! grep -q '^OPLEDGER_DEMO_TENANT_ID=' "$keys"; then
    echo "OPLEDGER_DEMO_TENANT_ID=$tenant_id" >>"$keys"
fi
custody_tenant_id="$(psql "$owner_url" -tAc "SELECT tenant_id FROM tenants WHERE name = 'demo-custodian'")"
if ! grep -q '^OPLEDGER_CUSTODY_TENANT_ID=' "$keys"; then
    echo "OPLEDGER_CUSTODY_TENANT_ID=$custody_tenant_id" >>"$keys"
fi

# Trust material, development only: a demo tenant administrator key (its public key is pinned in
# the signer's [[trust_roots]]) and a demo approver key (registered in trust statement v1), each
# in its own file (mode 600, written once). Their public keys are recorded in keys.env; a key
# file whose public key was never recorded was never used, so it is made again.
admin_key_file="$state/trust-admin.key"
approver_key_file="$state/approver.key"
operator_key_file="$state/operator.key"
if ! grep -q '^OPLEDGER_DEMO_TRUST_ADMIN_PUBLIC_KEY=' "$keys"; then
    log "creating the demo tenant administrator key"
    rm -f "$admin_key_file"
    made="$("$bin/opledger-admin" --json trust keygen --out "$admin_key_file")"
    echo "OPLEDGER_DEMO_TRUST_ADMIN_PUBLIC_KEY=$(sed -E 's/.*"public_key":"([0-9a-f]{64})".*/\1/' <<<"$made")" >>"$keys"
fi
if ! grep -q '^OPLEDGER_DEMO_APPROVER_PUBLIC_KEY=' "$keys"; then
    log "creating the demo approver signing key"
    rm -f "$approver_key_file"
    made="$("$bin/opctl" --json approver keygen --out "$approver_key_file")"
    {
        echo "# the demo approver's Ed25519 signing key is the file below (opctl --key-file); the"
        echo "# OPLEDGER_DEMO_APPROVER_KEY above is its API key"
        echo "OPLEDGER_DEMO_APPROVER_KEY_FILE=$approver_key_file"
        echo "OPLEDGER_DEMO_APPROVER_PUBLIC_KEY=$(sed -E 's/.*"public_key":"([0-9a-f]{64})".*/\1/' <<<"$made")"
    } >>"$keys"
fi
if ! grep -q '^OPLEDGER_DEMO_OPERATOR_PUBLIC_KEY=' "$keys"; then
    log "creating the demo operator signing key (credit statements)"
    rm -f "$operator_key_file"
    made="$("$bin/opctl" --json approver keygen --out "$operator_key_file")"
    {
        echo "# the demo operator's Ed25519 signing key (opctl credit --key-file)"
        echo "OPLEDGER_DEMO_OPERATOR_KEY_FILE=$operator_key_file"
        echo "OPLEDGER_DEMO_OPERATOR_PUBLIC_KEY=$(sed -E 's/.*"public_key":"([0-9a-f]{64})".*/\1/' <<<"$made")"
    } >>"$keys"
fi
chmod 600 "$admin_key_file" "$approver_key_file" "$operator_key_file" "$keys"
# shellcheck disable=SC1090
source "$keys"
published="$(psql "$owner_url" -tAc "SELECT count(*) FROM trust_statements WHERE tenant_id = '$tenant_id'")"
if [[ "$published" == 0 ]]; then
    log "publishing the demo tenant's trust statement v1 (one approver, one operator)"
    "$bin/opledger-admin" --database-url "$owner_url" trust publish --tenant demo \
        --admin-key-file "$admin_key_file" --version 1 \
        --approver "$OPLEDGER_DEMO_APPROVER_PUBLIC_KEY" \
        --operator "$OPLEDGER_DEMO_OPERATOR_PUBLIC_KEY" >&2
fi
published="$(psql "$owner_url" -tAc "SELECT count(*) FROM trust_statements WHERE tenant_id = '$custody_tenant_id'")"
if [[ "$published" == 0 ]]; then
    log "publishing the demo-custodian tenant's trust statement v1 (the same approver and operator)"
    "$bin/opledger-admin" --database-url "$owner_url" trust publish --tenant demo-custodian \
        --admin-key-file "$admin_key_file" --version 1 \
        --approver "$OPLEDGER_DEMO_APPROVER_PUBLIC_KEY" \
        --operator "$OPLEDGER_DEMO_OPERATOR_PUBLIC_KEY" >&2
fi
token_sha="$(printf %s "$OPLEDGER_DEMO_SIGNER_TOKEN" | sha256sum | cut -d' ' -f1)"
reconciler_token_sha="$(printf %s "$OPLEDGER_DEMO_RECONCILER_SIGNER_TOKEN" | sha256sum | cut -d' ' -f1)"
signer_config="$state/signer.toml"
if [[ -n "${signer_url:-}" ]]; then
    cat >"$signer_config" <<TOML
listen = "$signer_listen"
database_url = "$signer_url"
instance_id = "dev-signer"

# Each worker its own token and only its own moves.
[[callers]]
name = "broadcaster"
token_sha256 = "$token_sha"
capabilities = ["sign_withdrawal", "fee_bump"]

[[callers]]
name = "reconciler"
token_sha256 = "$reconciler_token_sha"
capabilities = ["cancel"]

[networks.anvil]
chain_id = 31337
native_asset = "ETH"
gas_limit_native = 21000
gas_limit_erc20 = 100000
max_fee_per_gas = "2000000000"
max_priority_fee_per_gas = "1000000000"
fee_bump_percent = 25
cancel_max_fee_per_gas = "20000000000"

[[wallets]]
tenant_id = "$tenant_id"
network = "anvil"
keystore = "$hot"
passphrase_file = "$state/hot.pass"

# The demo tenant's administrator key (development only): the signer accepts only trust
# statements it signed, and no version below min_version.
[[trust_roots]]
tenant_id = "$tenant_id"
admin_public_keys = ["$OPLEDGER_DEMO_TRUST_ADMIN_PUBLIC_KEY"]
min_version = 1
TOML
    chmod 600 "$signer_config"
    for worker in broadcaster reconciler; do
        listen_var="${worker}_listen"
        token_var=$([[ $worker == broadcaster ]] && echo OPLEDGER_DEMO_SIGNER_TOKEN || echo OPLEDGER_DEMO_RECONCILER_SIGNER_TOKEN)
        db_var="${worker}_url"
        metrics_port=$([[ $worker == broadcaster ]] && echo 9104 || echo 9105)
        cat >"$state/$worker.toml" <<TOML
listen = "${!listen_var}"
metrics_listen = "127.0.0.1:$metrics_port"
database_url = "${!db_var}"
worker_id = "dev-$worker"
signer_url = "http://$signer_listen"
signer_token = "${!token_var}"

[rpc]
anvil = "$anvil_url"

# What counts as evidence on anvil: its one endpoint (quorum 1: the services warn at start; a
# production network names two or more independent https:// endpoints and quorum 2) and
# $dev_confirmations confirmations (1 s blocks; a production network keeps a safe depth or
# finalized = true).
$anvil_evidence
TOML
        chmod 600 "$state/$worker.toml"
    done
    # The custodian double's API key pair (RSA, made with openssl at the first start, never
    # committed) and API key; the executor and the witness each get their own copy of the
    # credential files. Development only: every file mode 600 in a mode-700 folder.
    custody="$state/custodian"
    if [[ ! -s "$custody/api.pem" || ! -s "$custody/webhook.pem" ]]; then
        command -v openssl >/dev/null || die "openssl is needed for the custodian double's keys"
        log "creating the custodian double's API and webhook keys"
        (
            umask 077
            mkdir -p "$custody"
            openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 \
                -out "$custody/api.pem" 2>/dev/null
            openssl pkey -in "$custody/api.pem" -pubout -out "$custody/api.pem.pub" 2>/dev/null
            openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 \
                -out "$custody/webhook.pem" 2>/dev/null
            printf 'dev-custodian-%s' "$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
                >"$custody/api_key"
        )
    fi
    for holder in executor witness; do
        (umask 077 && mkdir -p "$custody/$holder" &&
            cp "$custody/api.pem" "$custody/api_key" "$custody/$holder/")
    done
    # The witness: no signer token, no rpc; its own login and its own evidence endpoints (in
    # production other providers than the reconciler's, on another host).
    cat >"$state/witness.toml" <<TOML
listen = "$witness_listen"
metrics_listen = "127.0.0.1:9107"
database_url = "$witness_url"
witness_id = "dev-witness"

# Operator credits of the demo tenant count under trust statements its administrator key signed.
[[trust_roots]]
tenant_id = "$tenant_id"
admin_public_keys = ["$OPLEDGER_DEMO_TRUST_ADMIN_PUBLIC_KEY"]

# Deposits of anvil's coin are credited to registered addresses (opledger-admin deposit-address).
[deposit_assets.anvil]
native = "ETH"

$anvil_evidence

# The demo-custodian tenant's account at the double, looked up with the witness's own copy of
# the credentials: it attests a custodian release only from its own lookup.
[[custodian_accounts]]
name = "sim-fireblocks-witness"
tenant = "$custody_tenant_id"
network = "anvil"
asset = "ETH"

[custodian_accounts.provider]
profile = "lookup_by_reference"
base_url = "http://$sim_listen"
api_key_file = "$custody/witness/api_key"
api_secret_file = "$custody/witness/api.pem"
vault_account_id = "0"
asset_id = "ETH"
decimals = 18
consistency_window_secs = 0
TOML
    chmod 600 "$state/witness.toml"
    # The double: the Fireblocks profile, paying from its own hot wallet on the dev anvil.
    pem_json() { awk '{printf "%s\\n", $0}' "$1"; }
    cat >"$custody/sim.json" <<JSON
{
  "listen": "$sim_listen",
  "chain": {"rpc_url": "$anvil_url", "chain_id": 31337, "hot_wallet_key": "$sim_wallet_key"},
  "decimals": 18,
  "confirmations": $dev_confirmations,
  "faults": {"seed": 0, "rules": []},
  "fireblocks": {
    "api_key": "$(cat "$custody/api_key")",
    "api_public_key_pem": "$(pem_json "$custody/api.pem.pub")",
    "vault_account_id": "0", "asset_id": "ETH", "workspace_id": "dev",
    "webhook_signing_keys_pem": ["$(pem_json "$custody/webhook.pem")"],
    "consistency_lag_secs": 0, "authorization_delay_secs": 0
  }
}
JSON
    chmod 600 "$custody/sim.json"
    # The custodian executor: its own login, its own credentials, its own evidence; no signer
    # token.
    cat >"$state/custodian.toml" <<TOML
listen = "$custodian_listen"
metrics_listen = "127.0.0.1:9108"
database_url = "$custodian_url"
executor_id = "dev-custodian"
# Every account's network has [evidence] below: none settles on the provider's word alone.
unwatched_networks = []

# The demo-custodian tenant's withdrawals on anvil, sent to the double under our reference.
[[accounts]]
name = "sim-fireblocks"
tenant = "$custody_tenant_id"
network = "anvil"
asset = "ETH"

[accounts.provider]
profile = "lookup_by_reference"
base_url = "http://$sim_listen"
api_key_file = "$custody/executor/api_key"
api_secret_file = "$custody/executor/api.pem"
vault_account_id = "0"
asset_id = "ETH"
decimals = 18
consistency_window_secs = 5

# The approvals it sends on must verify as the signer's do: the demo-custodian tenant's
# administrator key (development only).
[[trust_roots]]
tenant_id = "$custody_tenant_id"
admin_public_keys = ["$OPLEDGER_DEMO_TRUST_ADMIN_PUBLIC_KEY"]
min_version = 1

$anvil_evidence
# What anvil's payouts are: its coin, and the only address the double pays from (its hot wallet,
# anvil's 9th development account): a transfer from anyone else never settles a withdrawal.
[payout_assets.anvil]
native = "ETH"
senders = ["0x23618e81e3f5cdf7f54c3d65f7fbc0abf5b21e8f"]
TOML
    chmod 600 "$state/custodian.toml"
fi
# The operations service's network registry: anvil's EVM transfers carry no memo, so a memo is
# refused at create. Creates need a hot wallet the signer registered for the tenant and network
# (it does at start); without the signer (OPLEDGER_DATABASE_URL) that check is off.
operations_config="$state/operations.toml"
require_executor=$([[ -s "$signer_config" ]] && echo true || echo false)
cat >"$operations_config" <<TOML
require_executor = $require_executor

[networks.anvil]
memo = false
TOML
if [[ -s "$signer_config" ]]; then
    # The demo-custodian tenant's withdrawals on anvil go to the custodian executor.
    cat >>"$operations_config" <<TOML

[[custodian_routes]]
tenant = "$custody_tenant_id"
network = "anvil"
TOML
fi
cat >&2 <<EOF2

opledger dev stack
  operations gRPC   $listen  (health and server reflection enabled)
  approvals gRPC    $approvals_listen
  signer gRPC       $signer_listen  (caller tokens: \$OPLEDGER_DEMO_SIGNER_TOKEN for the broadcaster, \$OPLEDGER_DEMO_RECONCILER_SIGNER_TOKEN for the reconciler)
  broadcaster       $broadcaster_listen (health), metrics http://127.0.0.1:9104/metrics
  reconciler        $reconciler_listen (operator API), metrics http://127.0.0.1:9105/metrics
  witness           $witness_listen (health), metrics http://127.0.0.1:9107/metrics
  custodian         $custodian_listen (health), metrics http://127.0.0.1:9108/metrics: the custodian
                    executor, sending tenant demo-custodian's anvil withdrawals to the double
                    (opledger-custodian-sim, Fireblocks profile) at http://$sim_listen
  inbox (webhooks)  http://$inbox_http\$OPLEDGER_DEMO_WEBHOOK_PATH (Standard Webhooks, secret
                    \$OPLEDGER_DEMO_WEBHOOK_SECRET), operator API $inbox_listen,
                    metrics http://127.0.0.1:9106/metrics
  anvil (chain)     $anvil_url  chain id 31337, 1 s blocks, state kept in $state/anvil-state.json
  database          $owner_url
  demo keys         $keys
  demo trust        tenant \$OPLEDGER_DEMO_TENANT_ID, administrator key $admin_key_file
                    (pinned in the signer), approver signing key $approver_key_file

Push one withdrawal end to end and see its timeline and trace id:
  OPCTL_API_KEY=\$OPLEDGER_DEMO_CLIENT_KEY OPCTL_APPROVER_KEY=\$OPLEDGER_DEMO_APPROVER_KEY \\
    OPCTL_TENANT_ID=\$OPLEDGER_DEMO_TENANT_ID $bin/opctl demo --key-file $approver_key_file
Approve one yourself (signed locally with the demo approver key; only the signature is sent):
  OPCTL_API_KEY=\$OPLEDGER_DEMO_APPROVER_KEY OPCTL_TENANT_ID=\$OPLEDGER_DEMO_TENANT_ID \\
    $bin/opctl approve <id> --key-file $approver_key_file
  $bin/opledger-admin --database-url $owner_url trust show --tenant demo
Or call the APIs, for example with grpcurl (reflection lists every method):
  grpcurl -plaintext -H "authorization: Bearer \$OPLEDGER_DEMO_CLIENT_KEY" $listen list opledger.v1.OperationsService
  grpcurl -plaintext -H "authorization: Bearer \$OPLEDGER_DEMO_CLIENT_KEY" \\
    -d '{"idempotency_key":"'\$(uuidgen)'","payload":{"source_account":"treasury","asset":"ETH","network":"anvil","destination":"0x70997970c51812dc3a010c7d01b50e0d17dc79c8","amount":"1000","fee_cap":"1000000000000000","policy_version":1}}' \\
    $listen opledger.v1.OperationsService/CreateWithdrawal
  grpcurl -plaintext -H "authorization: Bearer \$OPLEDGER_DEMO_CLIENT_KEY" \\
    -d '{"account":"treasury","asset":"ETH"}' $listen opledger.v1.OperationsService/GetBalance
  grpcurl -plaintext -H "authorization: Bearer \$OPLEDGER_DEMO_APPROVER_KEY" \\
    -d '{"asset":"ETH"}' $approvals_listen opledger.v1.ApprovalsService/GetApprovalPolicy
  (ApproveWithdrawal takes a signed approval statement: use opctl approve, above)
  (once approved, the broadcaster signs and submits it and the watcher confirms it on anvil)
  grpcurl -plaintext -H "authorization: Bearer \$OPLEDGER_DEMO_OPERATOR_KEY" \\
    -d '{}' $reconciler_listen opledger.v1.OperatorService/ListUnresolved
  grpcurl -plaintext -H "authorization: Bearer \$OPLEDGER_DEMO_OPERATOR_KEY" \\
    -d '{}' $inbox_listen opledger.v1.InboxService/ListInboxIssues
  grpcurl -plaintext -d '{"service":"opledger.witness"}' $witness_listen grpc.health.v1.Health/Check
  (the witness serves no API: what it attested and refused is in release_attestations and
  witness_refusals)
Push one withdrawal through the custodian (tenant demo-custodian: the executor sends it to the
double under its id, follows the double's record and settles it from anvil):
  OPCTL_API_KEY=\$OPLEDGER_CUSTODY_CLIENT_KEY OPCTL_APPROVER_KEY=\$OPLEDGER_CUSTODY_APPROVER_KEY \\
    OPCTL_TENANT_ID=\$OPLEDGER_CUSTODY_TENANT_ID $bin/opctl demo --key-file $approver_key_file
  curl -s http://127.0.0.1:9108/metrics | grep ^opledger_custodian
  curl -s http://$sim_listen/sim/transfers   (what the double paid, by our reference)
(source $keys first; Ctrl-C stops the services and the local cluster)

EOF2

cleanup() {
    if [[ -z "${OPLEDGER_DATABASE_URL:-}" && "$ha" == 1 ]]; then
        bash scripts/ha.sh stop "$OPLEDGER_REPO_ROOT/.data/dev-ha" || true
    elif [[ -z "${OPLEDGER_DATABASE_URL:-}" ]]; then
        bash scripts/pg.sh stop "$OPLEDGER_REPO_ROOT/.data/dev-pg" || true
    fi
}
trap cleanup EXIT
pids=()
if [[ -s "$signer_config" ]]; then
    # The chain: anvil from the pinned npm package; its state survives restarts so the hot
    # wallet's nonces stay in step with the signer's database.
    anvil_bin="$(bash scripts/anvil.sh install)"
    "$anvil_bin" --host 127.0.0.1 --port "$anvil_port" --chain-id 31337 --block-time 1 \
        --state "$state/anvil-state.json" >"$state/anvil.log" 2>&1 &
    pids+=("$!")
    for _ in $(seq 1 100); do
        port_in_use "$anvil_port" && break
        sleep 0.1
    done
    port_in_use "$anvil_port" || die "anvil did not start: see $state/anvil.log"
fi
OPLEDGER_APPROVALS_DATABASE_URL="$approvals_url" OPLEDGER_APPROVALS_LISTEN="$approvals_listen" \
    "$bin/opledger-approvals" &
pids+=("$!")
if [[ -s "$signer_config" ]]; then
    OPLEDGER_SIGNER_CONFIG="$signer_config" "$bin/opledger-signer" &
    pids+=("$!")
    OPLEDGER_BROADCASTER_CONFIG="$state/broadcaster.toml" "$bin/opledger-broadcaster" &
    pids+=("$!")
    OPLEDGER_RECONCILER_CONFIG="$state/reconciler.toml" "$bin/opledger-reconciler" &
    pids+=("$!")
    OPLEDGER_WITNESS_CONFIG="$state/witness.toml" "$bin/opledger-witness" &
    pids+=("$!")
    # The custodian double first (its records are what the executor follows), then the executor.
    "$bin/opledger-custodian-sim" --config "$custody/sim.json" \
        >"$custody/sim.out" 2>"$state/custodian-sim.log" &
    pids+=("$!")
    for _ in $(seq 1 100); do
        grep -q '^listening on ' "$custody/sim.out" 2>/dev/null && break
        sleep 0.1
    done
    if ! grep -q '^listening on ' "$custody/sim.out"; then
        kill -TERM "${pids[@]}" 2>/dev/null || true
        die "the custodian double did not start: see $state/custodian-sim.log"
    fi
    OPLEDGER_CUSTODIAN_CONFIG="$state/custodian.toml" "$bin/opledger-custodian-executor" &
    pids+=("$!")
fi
OPLEDGER_OPERATIONS_CONFIG="$operations_config" OPLEDGER_OPERATIONS_DATABASE_URL="$operations_url" \
    OPLEDGER_OPERATIONS_LISTEN="$listen" "$bin/opledger-operations" &
pids+=("$!")
OPLEDGER_INBOX_DATABASE_URL="$inbox_url" OPLEDGER_INBOX_LISTEN="$inbox_listen" \
    OPLEDGER_INBOX_HTTP_LISTEN="$inbox_http" "$bin/opledger-inbox" &
pids+=("$!")
trap 'kill -TERM "${pids[@]}" 2>/dev/null || true' INT TERM
# Stop everything as soon as any service exits.
wait -n "${pids[@]}" || true
kill -TERM "${pids[@]}" 2>/dev/null || true
wait || true
