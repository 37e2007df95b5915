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


cmd_install() {
    npm_pinned_install anvil "@foundry-rs/anvil" "$ANVIL_DIR" "$(pinned_version)" "$(binary_path)" \
        "@foundry-rs/$(platform_package)"
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
