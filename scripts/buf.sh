#!/usr/bin/env bash
# buf (Buf's protobuf linter and breaking-change checker) for proto/, installed from the npm registry.
#
#   buf.sh install       install the pinned buf into tools/buf/node_modules if needed
#                        (idempotent; no npm call when the right version is already there);
#                        print the absolute path of the buf binary
#   buf.sh path          print the absolute path of the installed buf binary (fails if missing)
#   buf.sh lint          install if needed, then `buf lint` with buf.yaml's rules; prints
#                        "lint clean (N files)", or the findings (stderr) and exits 1
#   buf.sh breaking [REF]
#                        install if needed, then `buf breaking` of the working tree's proto/
#                        against proto/ at REF (default HEAD~1) under buf.yaml's FILE rules;
#                        prints "none against REF (<short sha>)", or the findings (stderr) and
#                        exits 1. Without such a commit (a single-commit or shallow history, or no
#                        git repository) it prints "skipped: ..." and exits 0.
#
# The version is pinned exactly in tools/buf/package.json and locked, with integrity hashes, in
# tools/buf/package-lock.json. The binary ships inside the platform package
# @bufbuild/buf-<os>-<arch> (an optional dependency of @bufbuild/buf that npm installs for the
# current platform only). Install scripts are not run (--ignore-scripts): the one of @bufbuild/buf
# only replaces its Node.js wrapper with that binary, or downloads it when the platform package
# is missing. buf needs no network at run time (the module has no dependencies; the well-known
# types are built in).
#
# Only stdout carries results; every diagnostic goes to stderr.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export OPLEDGER_LOG_PREFIX="buf.sh"

BUF_DIR="$OPLEDGER_REPO_ROOT/tools/buf"
PACKAGE_JSON="$BUF_DIR/package.json"
# The module's folder, relative to the repository root (buf.yaml: modules: - path: proto).
PROTO_SUBDIR=proto

usage() {
    sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# The exact version of @bufbuild/buf pinned in package.json.
pinned_version() {
    [[ -r "$PACKAGE_JSON" ]] || die "$PACKAGE_JSON is missing"
    local v
    v="$(sed -n 's/^[[:space:]]*"@bufbuild\/buf"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' \
        "$PACKAGE_JSON" | head -n1)"
    [[ "$v" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
        die "$PACKAGE_JSON must pin @bufbuild/buf to an exact version (x.y.z), found '$v'"
    printf '%s\n' "$v"
}

# npm's name for this platform: buf-<os>-<arch>, as published by Buf.
platform_package() {
    local os arch
    case "$(uname -s)" in
        Linux) os=linux ;;
        Darwin) os=darwin ;;
        *) die "unsupported OS '$(uname -s)': @bufbuild/buf ships binaries for Linux and macOS here" ;;
    esac
    case "$(uname -m)" in
        x86_64 | amd64) arch=x64 ;;
        aarch64 | arm64) if [[ "$os" == linux ]]; then arch=aarch64; else arch=arm64; fi ;;
        armv7l | armv7)
            [[ "$os" == linux ]] || die "unsupported CPU '$(uname -m)' on $os"
            arch=armv7
            ;;
        *) die "unsupported CPU '$(uname -m)': @bufbuild/buf ships binaries for x64, arm64 and armv7" ;;
    esac
    printf 'buf-%s-%s\n' "$os" "$arch"
}

binary_path() {
    printf '%s/node_modules/@bufbuild/%s/bin/buf\n' "$BUF_DIR" "$(platform_package)"
}

# Version printed by a buf binary ("1.75.0"), empty if it does not run.
binary_version() {
    "$1" --version 2>/dev/null | sed -n 's/^\([0-9][0-9.]*\)[[:space:]]*$/\1/p' | head -n1
}


cmd_install() {
    npm_pinned_install buf "@bufbuild/buf" "$BUF_DIR" "$(pinned_version)" "$(binary_path)" \
        "@bufbuild/$(platform_package)"
}

# The binary's path, installing it first when needed (quiet when it already is).
ensure_installed() {
    local bin
    bin="$(binary_path)"
    if npm_pinned_ok "$bin" "$(pinned_version)"; then
        printf '%s\n' "$bin"
    else
        cmd_install
    fi
}

cmd_path() {
    local bin
    bin="$(binary_path)"
    [[ -x "$bin" ]] || die "buf is not installed ($bin is missing): run scripts/buf.sh install"
    printf '%s\n' "$bin"
}

cmd_lint() {
    local bin files out
    bin="$(ensure_installed)"
    cd "$OPLEDGER_REPO_ROOT"
    files="$("$bin" ls-files 2>&1)" || {
        printf '%s\n' "$files" >&2
        die "buf could not read the module in $PROTO_SUBDIR/ (buf.yaml)"
    }
    [[ -n "$files" ]] || die "buf found no .proto file in $PROTO_SUBDIR/"
    if ! out="$("$bin" lint --error-format text 2>&1)"; then
        printf '%s\n' "$out" >&2
        die "buf lint: the findings above (fix them, or add a justified exception to buf.yaml)"
    fi
    printf 'lint clean (%d files)\n' "$(printf '%s\n' "$files" | grep -c .)"
}

cmd_breaking() {
    local ref="${1:-HEAD~1}" bin sha git_dir out
    bin="$(ensure_installed)"
    cd "$OPLEDGER_REPO_ROOT"
    command -v git >/dev/null 2>&1 || die "git is not installed: buf breaking needs it to read $ref"
    if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        log "notice: $OPLEDGER_REPO_ROOT is not a git work tree: buf breaking skipped"
        printf 'skipped: not a git work tree\n'
        return 0
    fi
    if ! sha="$(git rev-parse --verify --quiet "$ref^{commit}")"; then
        if [[ "$ref" == "HEAD~1" ]]; then
            log "notice: the history has no HEAD~1 (a single commit, or a shallow clone): buf breaking skipped"
            printf 'skipped: no HEAD~1 in the history\n'
            return 0
        fi
        die "'$ref' is not a commit of this repository"
    fi
    # The repository's own object store (also right in a linked worktree, where .git is a file).
    git_dir="$(cd "$(git rev-parse --git-common-dir)" && pwd -P)"
    if ! out="$("$bin" breaking --error-format text \
        --against "$git_dir#format=git,subdir=$PROTO_SUBDIR,ref=$sha" 2>&1)"; then
        printf '%s\n' "$out" >&2
        die "buf breaking: the changes above break clients generated from $PROTO_SUBDIR/ at $ref (${sha:0:7})"
    fi
    printf 'none against %s (%s)\n' "$ref" "${sha:0:7}"
}

main() {
    local cmd="${1:-}"
    [[ $# -gt 0 ]] && shift
    case "$cmd" in
        install | path | lint)
            [[ $# -eq 0 ]] || usage
            "cmd_$cmd"
            ;;
        breaking)
            [[ $# -le 1 ]] || usage
            cmd_breaking "$@"
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
