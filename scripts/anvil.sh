#!/usr/bin/env bash
# The anvil EVM node (Foundry) that the tests run, installed from the npm registry.
#
#   anvil.sh install    install the pinned anvil into tools/anvil/node_modules if needed
#                       (idempotent; no npm call when the right version is already there);
#                       print the absolute path of the anvil binary
#   anvil.sh path       print the absolute path of the installed anvil binary (fails if missing)
#
# The version is pinned exactly in tools/anvil/package.json and locked, with integrity hashes,
# in tools/anvil/package-lock.json. The binary ships inside the platform package
# @foundry-rs/anvil-<os>-<arch> (an optional dependency of @foundry-rs/anvil that npm installs
# for the current platform only). Install scripts are not run (--ignore-scripts): the one of
# @foundry-rs/anvil only downloads the binary itself when the platform package is missing.
#
# Only stdout carries results; every diagnostic goes to stderr.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export OPLEDGER_LOG_PREFIX="anvil.sh"

ANVIL_DIR="$OPLEDGER_REPO_ROOT/tools/anvil"
PACKAGE_JSON="$ANVIL_DIR/package.json"
LOCK_FILE="$ANVIL_DIR/package-lock.json"
NPM_FLAGS=(--no-audit --no-fund --ignore-scripts --update-notifier=false)

usage() {
    sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# The exact version of @foundry-rs/anvil pinned in package.json.
pinned_version() {
    [[ -r "$PACKAGE_JSON" ]] || die "$PACKAGE_JSON is missing"
    local v
    v="$(sed -n 's/^[[:space:]]*"@foundry-rs\/anvil"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' \
        "$PACKAGE_JSON" | head -n1)"
    [[ "$v" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
        die "$PACKAGE_JSON must pin @foundry-rs/anvil to an exact version (x.y.z), found '$v'"
    printf '%s\n' "$v"
}

# npm's name for this platform: anvil-<os>-<arch>, as published by Foundry.
platform_package() {
    local os arch
    case "$(uname -s)" in
        Linux) os=linux ;;
        Darwin) os=darwin ;;
        *) die "unsupported OS '$(uname -s)': @foundry-rs/anvil ships binaries for Linux and macOS" ;;
    esac
    case "$(uname -m)" in
        x86_64 | amd64) arch=amd64 ;;
        aarch64 | arm64) arch=arm64 ;;
        *) die "unsupported CPU '$(uname -m)': @foundry-rs/anvil ships binaries for amd64 and arm64" ;;
    esac
    printf 'anvil-%s-%s\n' "$os" "$arch"
}

binary_path() {
    printf '%s/node_modules/@foundry-rs/%s/bin/anvil\n' "$ANVIL_DIR" "$(platform_package)"
}

# Version printed by an anvil binary ("anvil Version: 1.7.1"), empty if it does not run.
binary_version() {
    "$1" --version 2>/dev/null | sed -n 's/^anvil Version: \([^[:space:]]*\).*/\1/p' | head -n1
}

# True when BIN is executable and reports VERSION.
is_installed() {
    local bin="$1" version="$2"
    [[ -x "$bin" ]] && [[ "$(binary_version "$bin")" == "$version" ]]
}

cmd_install() {
    local version bin
    version="$(pinned_version)"
    bin="$(binary_path)"
    if is_installed "$bin" "$version"; then
        log "anvil $version already installed (no npm call)"
        printf '%s\n' "$bin"
        return 0
    fi

    # One install at a time (the lock is held on package.json until this script exits).
    exec 9<"$PACKAGE_JSON"
    flock 9
    if is_installed "$bin" "$version"; then
        printf '%s\n' "$bin"
        return 0
    fi

    command -v npm >/dev/null 2>&1 ||
        die "npm is not installed: install Node.js and npm (e.g. apt-get install -y nodejs npm), then rerun"

    local started=$SECONDS
    if [[ -f "$LOCK_FILE" ]]; then
        log "installing @foundry-rs/anvil $version (npm ci in $ANVIL_DIR)"
        (cd "$ANVIL_DIR" && npm ci "${NPM_FLAGS[@]}") >&2 9<&- ||
            die "npm ci failed in $ANVIL_DIR (does package-lock.json still match package.json?)"
    else
        log "installing @foundry-rs/anvil $version (npm install in $ANVIL_DIR: writes package-lock.json)"
        (cd "$ANVIL_DIR" && npm install "${NPM_FLAGS[@]}") >&2 9<&- ||
            die "npm install failed in $ANVIL_DIR"
    fi

    [[ -e "$bin" ]] ||
        die "npm finished but $bin does not exist: did npm skip the optional dependency @foundry-rs/$(platform_package)?"
    [[ -x "$bin" ]] || die "npm finished but $bin is not executable"
    local got
    got="$(binary_version "$bin")"
    [[ "$got" == "$version" ]] ||
        die "$bin reports version '${got:-(none: it does not run)}', expected $version"
    log "anvil $version installed in $((SECONDS - started))s"
    printf '%s\n' "$bin"
}

cmd_path() {
    local bin
    bin="$(binary_path)"
    [[ -x "$bin" ]] || die "anvil is not installed ($bin is missing): run scripts/anvil.sh install"
    printf '%s\n' "$bin"
}

main() {
    local cmd="${1:-}"
    [[ $# -gt 0 ]] && shift
    case "$cmd" in
        install | path)
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
