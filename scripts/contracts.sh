#!/usr/bin/env bash
# The Solidity contracts of the tests (tools/contracts), compiled with solc-js from npm.
#
#   contracts.sh compile   compile tools/contracts/TestToken.sol into tools/contracts/TestToken.json
#                          (the committed artifact that opledger-testkit deploys on anvil)
#   contracts.sh check     compile into a temporary file and fail if it differs from the
#                          committed TestToken.json (the artifact is stale or not reproducible)
#
# solc is pinned exactly in tools/contracts/package.json and locked, with integrity hashes, in
# tools/contracts/package-lock.json; it is installed with npm ci into tools/contracts/node_modules
# (no npm call when the pinned version is already there). solc-js is JavaScript and WebAssembly:
# once installed it compiles offline. Compiler settings (optimizer 200 runs, EVM version) are
# fixed in tools/contracts/compile.js. Node.js and npm are required.
#
# Only stdout carries results (the artifact's path); every diagnostic goes to stderr.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export OPLEDGER_LOG_PREFIX="contracts.sh"

CONTRACTS_DIR="$OPLEDGER_REPO_ROOT/tools/contracts"
PACKAGE_JSON="$CONTRACTS_DIR/package.json"
LOCK_FILE="$CONTRACTS_DIR/package-lock.json"
ARTIFACT="$CONTRACTS_DIR/TestToken.json"
NPM_FLAGS=(--no-audit --no-fund --ignore-scripts --update-notifier=false)

usage() {
    sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# The exact version of solc pinned in package.json.
pinned_version() {
    [[ -r "$PACKAGE_JSON" ]] || die "$PACKAGE_JSON is missing"
    local v
    v="$(sed -n 's/^[[:space:]]*"solc"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' \
        "$PACKAGE_JSON" | head -n1)"
    [[ "$v" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
        die "$PACKAGE_JSON must pin solc to an exact version (x.y.z), found '$v'"
    printf '%s\n' "$v"
}

# The version of the solc package in node_modules, empty if there is none.
installed_version() {
    local pkg="$CONTRACTS_DIR/node_modules/solc/package.json"
    [[ -r "$pkg" ]] || return 0
    sed -n 's/^[[:space:]]*"version"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$pkg" | head -n1
}

require_node() {
    command -v node >/dev/null 2>&1 ||
        die "node is not installed: install Node.js and npm (e.g. apt-get install -y nodejs npm), then rerun"
}

# npm ci of the pinned solc unless node_modules already holds it.
ensure_solc() {
    local version
    version="$(pinned_version)"
    [[ "$(installed_version)" == "$version" ]] && return 0

    # One install at a time (the lock is held on package.json until this script exits).
    exec 9<"$PACKAGE_JSON"
    flock 9
    [[ "$(installed_version)" == "$version" ]] && return 0

    command -v npm >/dev/null 2>&1 ||
        die "npm is not installed: install Node.js and npm (e.g. apt-get install -y nodejs npm), then rerun"
    [[ -f "$LOCK_FILE" ]] || die "$LOCK_FILE is missing: run 'npm install ${NPM_FLAGS[*]}' in $CONTRACTS_DIR and commit it"
    local started=$SECONDS
    log "installing solc $version (npm ci in $CONTRACTS_DIR)"
    (cd "$CONTRACTS_DIR" && npm ci "${NPM_FLAGS[@]}") >&2 9<&- ||
        die "npm ci failed in $CONTRACTS_DIR (does package-lock.json still match package.json?)"
    [[ "$(installed_version)" == "$version" ]] ||
        die "npm ci finished but node_modules/solc is '$(installed_version)', expected $version"
    log "solc $version installed in $((SECONDS - started))s"
}

# Compiles into OUT with tools/contracts/compile.js.
compile_to() {
    require_node
    ensure_solc
    node "$CONTRACTS_DIR/compile.js" "$1" ||
        die "compiling $CONTRACTS_DIR/TestToken.sol failed"
}

cmd_compile() {
    compile_to "$ARTIFACT"
    printf '%s\n' "$ARTIFACT"
}

cmd_check() {
    [[ -f "$ARTIFACT" ]] || die "$ARTIFACT is missing: run scripts/contracts.sh compile and commit it"
    local tmp
    tmp="$(mktemp "${TMPDIR:-/tmp}/opledger-TestToken.XXXXXX.json")"
    # shellcheck disable=SC2064 # expand $tmp now
    trap "rm -f '$tmp'" EXIT
    compile_to "$tmp"
    if ! cmp -s "$ARTIFACT" "$tmp"; then
        diff -u --label "committed $ARTIFACT" --label "freshly compiled" "$ARTIFACT" "$tmp" |
            head -n 40 >&2 || true
        die "$ARTIFACT differs from a fresh compile of TestToken.sol: run scripts/contracts.sh compile and commit the result"
    fi
    log "$ARTIFACT matches a fresh compile"
    printf '%s\n' "$ARTIFACT"
}

main() {
    local cmd="${1:-}"
    [[ $# -gt 0 ]] && shift
    case "$cmd" in
        compile | check)
            [[ $# -eq 0 ]] || usage
            "cmd_$cmd"
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
