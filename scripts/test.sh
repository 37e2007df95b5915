#!/usr/bin/env bash
# The one command that runs every test of the workspace:
#
#   bash scripts/test.sh [RUNNER ARGS...]
#
#   1. makes sure PostgreSQL is installed (scripts/pg.sh ensure-installed), and etcd, Patroni and
#      HAProxy for the failover suite (scripts/ha.sh ensure-installed, apt-get when missing);
#   2. lints the protobuf API and checks it for breaking changes against HEAD~1 with the pinned buf
#      (scripts/buf.sh lint, scripts/buf.sh breaking; installed from npm if needed), checks
#      formatting (cargo fmt) and lints (cargo clippy -D warnings), and prints the structure
#      numbers of scripts/house.sh (a report, never a failure);
#   3. builds the workspace binaries (tests run them as child processes, see opledger-testkit);
#   4. starts a throwaway PostgreSQL cluster in .data/test-pg (destroyed on exit, whatever happens)
#      and exports OPLEDGER_TEST_DATABASE_URL;
#   5. installs the pinned anvil EVM node from npm if needed (scripts/anvil.sh install) and
#      exports its path as OPLEDGER_ANVIL_BIN (opledger-testkit's Anvil runs it);
#   6. installs promtool (Debian's prometheus package) if missing, for the alert-rule tests;
#   6b. installs SoftHSM2 (scripts/hsm.sh, Debian's softhsm2) if missing and exports
#      OPLEDGER_PKCS11_MODULE and SOFTHSM2_CONF (a token directory in .data/test-hsm, removed on
#      exit) for the HSM suite;
#   7. runs cargo nextest (or cargo test when nextest is missing) with RUNNER ARGS appended,
#      e.g. `bash scripts/test.sh -p opledger-testkit`, and exits with the runner's status;
#   8. after a full nextest run (no RUNNER ARGS), prints the go/no-go report of the 13 controls
#      from that run's results (opledger-admin controls report; written to target/controls/) and
#      fails unless it says GO.
#   9. then runs the signer's suites (tests/signer, tests/redteam, tests/broadcaster) once more
#      with every in-process signer's wallets held in a SoftHSM2 token
#      (OPLEDGER_TEST_KEY_BACKEND=pkcs11).
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export OPLEDGER_LOG_PREFIX="test.sh"
cd "$OPLEDGER_REPO_ROOT"

PG_SH="$OPLEDGER_REPO_ROOT/scripts/pg.sh"
TEST_PG_DIR="$OPLEDGER_REPO_ROOT/.data/test-pg"
TEST_HSM_DIR="$OPLEDGER_REPO_ROOT/.data/test-hsm"
ANVIL_SH="$OPLEDGER_REPO_ROOT/scripts/anvil.sh"
BUF_SH="$OPLEDGER_REPO_ROOT/scripts/buf.sh"

log "PostgreSQL: $(bash "$PG_SH" ensure-installed)"
# The failover suite's topology (tests/failover starts its own per test): etcd, Patroni, HAProxy.
bash "$OPLEDGER_REPO_ROOT/scripts/ha.sh" ensure-installed >/dev/null
log "HA topology tools: $(patroni --version 2>&1 | head -n1), etcd $(etcd --version 2>/dev/null | sed -n 's/^etcd Version: //p'), $("$(command -v haproxy || echo /usr/sbin/haproxy)" -v 2>/dev/null | head -n1 | cut -d" " -f1-3)"

# The protobuf API first (seconds): buf lint with buf.yaml's rules, buf breaking (FILE rules)
# against the previous commit. A finding fails the run; buf.sh prints it on stderr.
buf_lint="$(bash "$BUF_SH" lint)" ||
    die "buf lint failed (above): fix proto/, or add a justified exception to buf.yaml"
buf_breaking="$(bash "$BUF_SH" breaking)" ||
    die "buf breaking failed (above): the proto change breaks generated clients; keep the old names and numbers"
log "buf: $buf_lint, breaking: $buf_breaking"

log "cargo fmt --all -- --check"
cargo fmt --all -- --check ||
    die "formatting differs from rustfmt: run 'cargo fmt --all' and commit the result"

log "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings ||
    die "clippy found problems (warnings are errors): fix them before running the tests"
# The structure numbers of issue 26 (a report: it never fails the run).
log "$(bash "$OPLEDGER_REPO_ROOT/scripts/house.sh" --quiet 2>/dev/null)"

log "cargo build --workspace --bins"
cargo build --workspace --bins || die "cargo build --workspace --bins failed"

# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    bash "$PG_SH" destroy "$TEST_PG_DIR" || log "warning: could not destroy $TEST_PG_DIR"
    rm -rf "$TEST_HSM_DIR"
    exit "$status"
}

bash "$PG_SH" destroy "$TEST_PG_DIR"
mkdir -p "$OPLEDGER_REPO_ROOT/.data"
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
OPLEDGER_TEST_DATABASE_URL="$(OPLEDGER_PG_FAST=1 bash "$PG_SH" start "$TEST_PG_DIR")"
export OPLEDGER_TEST_DATABASE_URL
log "OPLEDGER_TEST_DATABASE_URL=$OPLEDGER_TEST_DATABASE_URL"

OPLEDGER_ANVIL_BIN="$(bash "$ANVIL_SH" install)"
export OPLEDGER_ANVIL_BIN
log "OPLEDGER_ANVIL_BIN=$OPLEDGER_ANVIL_BIN"

# The committed ERC-20 artifact must be what the pinned solc makes of the committed source.
bash "$OPLEDGER_REPO_ROOT/scripts/contracts.sh" check >/dev/null

# promtool checks the Prometheus alert rules (Debian's prometheus package; no service is started).
if ! command -v promtool >/dev/null 2>&1; then
    log "promtool not found: installing Debian's prometheus package"
    if is_root; then
        DEBIAN_FRONTEND=noninteractive apt-get update >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus >&2
    elif command -v sudo >/dev/null 2>&1; then
        sudo env DEBIAN_FRONTEND=noninteractive apt-get update >&2
        sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus >&2
    else
        die "promtool is missing and this is not root: install it (apt-get install prometheus)"
    fi
fi
OPLEDGER_PROMTOOL="$(command -v promtool)"
export OPLEDGER_PROMTOOL

# SoftHSM2, the PKCS#11 token of the HSM suite (tests/hsm; each test initialises a token of its
# own): installed with apt-get if missing; its tokens live in .data/test-hsm for this run only.
OPLEDGER_PKCS11_MODULE="$(bash "$OPLEDGER_REPO_ROOT/scripts/hsm.sh" ensure-installed)"
export OPLEDGER_PKCS11_MODULE
rm -rf "$TEST_HSM_DIR"
SOFTHSM2_CONF="$(bash "$OPLEDGER_REPO_ROOT/scripts/hsm.sh" conf "$TEST_HSM_DIR")"
export SOFTHSM2_CONF
log "OPLEDGER_PKCS11_MODULE=$OPLEDGER_PKCS11_MODULE SOFTHSM2_CONF=$SOFTHSM2_CONF"

# `--workspace` unless the caller selects packages with -p/--package.
scope=(--workspace)
for arg in "$@"; do
    case "$arg" in
        --) break ;;
        -p | --package | -p* | --package=*) scope=() ;;
    esac
done

if cargo nextest --version >/dev/null 2>&1; then
    runner=(cargo nextest run "${scope[@]+"${scope[@]}"}" --no-fail-fast)
else
    log "cargo-nextest not found: falling back to cargo test"
    runner=(cargo test "${scope[@]+"${scope[@]}"}" --no-fail-fast)
fi
log "${runner[*]} $*"
status=0
"${runner[@]}" "$@" || status=$?

# After a full nextest run, the go/no-go report of the 13 controls from the same results
# (target/controls/controls.md and .json): any failed or missing control fails the run.
junit="$OPLEDGER_REPO_ROOT/target/nextest/default/junit.xml"
if [[ $# -eq 0 && "${runner[1]}" == "nextest" && -s "$junit" ]]; then
    log "controls report (opledger-admin controls report)"
    "$OPLEDGER_REPO_ROOT/target/debug/opledger-admin" controls report --junit "$junit" \
        --repo "$OPLEDGER_REPO_ROOT" --out "$OPLEDGER_REPO_ROOT/target/controls" || status=1
    # The signer's suites again, every in-process signer's wallets held in a SoftHSM2 token
    # instead of memory (controls 02, 04 and 06, the red team, rotations, the broadcaster's
    # end-to-end runs; tests/support/signer.rs, OPLEDGER_TEST_KEY_BACKEND).
    log "the signer's suites with their wallets in a PKCS#11 token"
    OPLEDGER_TEST_KEY_BACKEND=pkcs11 cargo nextest run --no-fail-fast -p opledger-tests \
        --test signer --test redteam --test broadcaster || status=1
fi
exit "$status"
