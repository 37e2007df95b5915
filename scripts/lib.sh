# shellcheck shell=bash
# Shared helpers for the scripts in this folder. Source it; do not run it.
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# Everything here writes diagnostics to stderr so that scripts can keep stdout for their result
# (a URL, a path).

# The repository root: the parent of the folder holding this file.
OPLEDGER_REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
export OPLEDGER_REPO_ROOT

log() {
    printf '[%s] %s\n' "${OPLEDGER_LOG_PREFIX:-opledger}" "$*" >&2
}

die() {
    printf '[%s] error: %s\n' "${OPLEDGER_LOG_PREFIX:-opledger}" "$*" >&2
    exit 1
}

is_root() {
    [[ "$(id -u)" -eq 0 ]]
}

# Absolute form of a path that may not exist yet (its parent need not exist either).
abs_path() {
    local p="$1"
    case "$p" in
        /*) ;;
        *) p="$PWD/$p" ;;
    esac
    # Normalise "//", "/./" and a trailing "/" without resolving symlinks.
    p="$(printf '%s' "$p" | sed -e 's#//*#/#g' -e 's#/\./#/#g' -e 's#/\.$##' -e 's#\(.\)/$#\1#')"
    printf '%s\n' "$p"
}

# Hex SHA-256 of a string.
sha256_hex() {
    printf '%s' "$1" | sha256sum | cut -d' ' -f1
}

# A TCP port on 127.0.0.1 that is free right now.
pick_free_port() {
    local port
    if command -v python3 >/dev/null 2>&1 &&
        port="$(python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()' 2>/dev/null)" && [[ -n "$port" ]]; then
        printf '%s\n' "$port"
        return 0
    fi
    # Fallback: probe random ports with bash's /dev/tcp; a refused connection means free.
    local i
    for ((i = 0; i < 200; i++)); do
        port=$((20000 + RANDOM % 40000))
        if ! port_in_use "$port"; then
            printf '%s\n' "$port"
            return 0
        fi
    done
    die "could not find a free TCP port on 127.0.0.1"
}

# True when something accepts TCP connections on 127.0.0.1:PORT.
port_in_use() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Runs a command as the user that owns the caller's DIR (a cluster or an HA topology): ourselves,
# or $PG_OS_USER when we are root (PostgreSQL refuses to run as root). The working directory is
# DIR so that the tools never complain about an unreadable cwd (/root); fd 9 (the caller's lock on
# DIR) is closed so that a started daemon does not inherit and keep it. The caller sets DIR and
# PG_OS_USER.
as_owner() {
    if is_root; then
        (cd "$DIR" && runuser -u "$PG_OS_USER" -- "$@") 9>&-
    else
        (cd "$DIR" && "$@") 9>&-
    fi
}

# Installs a tool pinned in an npm package folder, once. The caller defines `binary_version BIN`
# (what BIN reports as its version). Arguments: a label (`anvil`), the npm package
# (`@foundry-rs/anvil`), the folder holding package.json and package-lock.json, the pinned
# version, the binary's path and the platform package that carries it. Prints the binary's path.
# Holds a lock on package.json while it installs, so concurrent callers install once.
npm_pinned_install() {
    local label="$1" package="$2" dir="$3" version="$4" bin="$5" platform="$6"
    local flags=(--no-audit --no-fund --ignore-scripts --update-notifier=false)
    if npm_pinned_ok "$bin" "$version"; then
        log "$label $version already installed (no npm call)"
        printf '%s\n' "$bin"
        return 0
    fi
    exec 9<"$dir/package.json"
    flock 9
    if npm_pinned_ok "$bin" "$version"; then
        printf '%s\n' "$bin"
        return 0
    fi
    command -v npm >/dev/null 2>&1 ||
        die "npm is not installed: install Node.js and npm (e.g. apt-get install -y nodejs npm), then rerun"
    local started=$SECONDS
    if [[ -f "$dir/package-lock.json" ]]; then
        log "installing $package $version (npm ci in $dir)"
        (cd "$dir" && npm ci "${flags[@]}") >&2 9<&- ||
            die "npm ci failed in $dir (does package-lock.json still match package.json?)"
    else
        log "installing $package $version (npm install in $dir: writes package-lock.json)"
        (cd "$dir" && npm install "${flags[@]}") >&2 9<&- ||
            die "npm install failed in $dir"
    fi
    [[ -e "$bin" ]] ||
        die "npm finished but $bin does not exist: did npm skip the optional dependency $platform?"
    [[ -x "$bin" ]] || die "npm finished but $bin is not executable"
    local got
    got="$(binary_version "$bin")"
    [[ "$got" == "$version" ]] ||
        die "$bin reports version '${got:-(none: it does not run)}', expected $version"
    log "$label $version installed in $((SECONDS - started))s"
    printf '%s\n' "$bin"
}

# True when BIN is executable and reports VERSION (through the caller's `binary_version`).
npm_pinned_ok() {
    [[ -x "$1" ]] && [[ "$(binary_version "$1")" == "$2" ]]
}
