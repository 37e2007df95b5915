#!/usr/bin/env bash
# Benchmarks, each against a baseline measured in the same run.
#
#   scripts/bench.sh create [ARGS...]   CreateWithdrawal over gRPC vs the same SQL via pgbench
#                                       (ARGS go to `opledger-bench create`, e.g. --seconds 20);
#                                       without ARGS it runs twice: one hot source account
#                                       (--accounts 1) and 64 source accounts (--accounts 64)
#   scripts/bench.sh sign [ARGS...]     signatures persisted per second by the real signer
#                                       (in-process, under its restricted database role) for one
#                                       and for eight sender addresses, vs evm::sign alone (ARGS
#                                       go to `opledger-bench sign`, e.g. --withdrawals 4000
#                                       --backend pkcs11); without ARGS it runs twice, the keys in
#                                       memory (--backend keystore) then in a SoftHSM2 token
#                                       (--backend pkcs11, scripts/hsm.sh)
#   scripts/bench.sh pipeline [ARGS...] create -> approve -> sign -> broadcast -> CONFIRMED with
#                                       every service in-process on anvil (1-second blocks), the
#                                       reconciler and the witness polling with their defaults,
#                                       for one and for eight sender addresses, vs the node's own
#                                       eth_sendRawTransaction rate (installs the pinned anvil;
#                                       ARGS go to `opledger-bench pipeline`, e.g.
#                                       --withdrawals 200; `--instances 1,2` measures each
#                                       sender count with one and then two broadcaster,
#                                       reconciler and witness instances, and fails on duplicate
#                                       work; `--no-send-counter` submits straight to the node
#                                       instead of through the proxy that counts each
#                                       transaction's sends; refused with more than one instance)
#   scripts/bench.sh verify [ARGS...]   the signer's approval verification per withdrawal (the
#                                       trust statement's signature, the quorum of 1, 2 and 3
#                                       signed approvals) vs recomputing the payload hash, in the
#                                       same run (no database; ARGS go to `opledger-bench verify`)
#   scripts/bench.sh webhook [ARGS...]  verified webhooks ingested per second: signed
#                                       deposit.confirmed deliveries over HTTP/1.1 keep-alive to
#                                       the real opledger-inbox (signature check, inbox row + work
#                                       item committed before the 200; its processor runs) at
#                                       concurrency 16 and 64, vs the same transaction via pgbench
#                                       (ARGS go to `opledger-bench webhook`, e.g. --seconds 30
#                                       --concurrency 16,64)
#
# Builds release binaries, provisions a throwaway PostgreSQL cluster under .data/bench-pg with
# durable settings (fsync and synchronous_commit on, like production), runs the benchmark and
# destroys the cluster.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export OPLEDGER_LOG_PREFIX="bench.sh"
cd "$OPLEDGER_REPO_ROOT"

what="${1:-create}"
shift || true
[[ "$what" == "create" || "$what" == "sign" || "$what" == "pipeline" || "$what" == "webhook" ||
    "$what" == "verify" ]] ||
    die "unknown benchmark '$what' (known: create, sign, pipeline, webhook, verify)"
if [[ "$what" == "verify" ]]; then
    log "cargo build --release -p opledger-bench"
    cargo build --release -p opledger-bench >&2
    exec "$OPLEDGER_REPO_ROOT/target/release/opledger-bench" verify "$@"
fi

bash scripts/pg.sh ensure-installed >/dev/null
if [[ "$what" == "pipeline" ]]; then
    anvil_bin="$(bash scripts/anvil.sh install)"
fi
log "cargo build --release"
if [[ "$what" == "webhook" ]]; then
    cargo build --release -p opledger-inbox -p opledger-bench >&2
else
    cargo build --release -p opledger-operations -p opledger-bench >&2
fi

dir="$OPLEDGER_REPO_ROOT/.data/bench-pg"
bash scripts/pg.sh destroy "$dir"
trap 'bash scripts/pg.sh destroy "$dir" || true' EXIT
url="$(OPLEDGER_PG_FAST=0 bash scripts/pg.sh start "$dir")"
if [[ "$what" == "sign" ]]; then
    # SoftHSM2 for --backend pkcs11: a token directory of the run's own, removed on exit.
    OPLEDGER_PKCS11_MODULE="$(bash scripts/hsm.sh ensure-installed)"
    export OPLEDGER_PKCS11_MODULE
    hsm_dir="$OPLEDGER_REPO_ROOT/.data/bench-hsm"
    rm -rf "$hsm_dir"
    trap 'bash scripts/pg.sh destroy "$dir" || true; rm -rf "$hsm_dir"' EXIT
    SOFTHSM2_CONF="$(bash scripts/hsm.sh conf "$hsm_dir")"
    export SOFTHSM2_CONF
    if [[ $# -eq 0 ]]; then
        # Both key backends, one after the other: their figures side by side.
        for backend in keystore pkcs11; do
            "$OPLEDGER_REPO_ROOT/target/release/opledger-bench" sign --admin-url "$url" --backend "$backend"
            echo
        done
    else
        "$OPLEDGER_REPO_ROOT/target/release/opledger-bench" sign --admin-url "$url" "$@"
    fi
elif [[ "$what" == "webhook" ]]; then
    "$OPLEDGER_REPO_ROOT/target/release/opledger-bench" webhook --admin-url "$url" "$@"
elif [[ "$what" == "pipeline" ]]; then
    "$OPLEDGER_REPO_ROOT/target/release/opledger-bench" pipeline --admin-url "$url" \
        --anvil-bin "$anvil_bin" "$@"
elif [[ $# -eq 0 ]]; then
    for accounts in 1 64; do
        "$OPLEDGER_REPO_ROOT/target/release/opledger-bench" create --admin-url "$url" --accounts "$accounts"
        echo
    done
else
    "$OPLEDGER_REPO_ROOT/target/release/opledger-bench" create --admin-url "$url" "$@"
fi
