#!/usr/bin/env bash
# SoftHSM2, the PKCS#11 token the tests and `scripts/dev.sh --hsm` keep hot-wallet keys in.
#
#   hsm.sh ensure-installed      install Debian's softhsm2 with apt-get if missing; print the
#                                path of its PKCS#11 module
#   hsm.sh conf DIR              create DIR/tokens and DIR/softhsm2.conf keeping tokens there
#                                (never the system's /var/lib/softhsm); print the conf's path,
#                                which SOFTHSM2_CONF must name for every process using them
#   hsm.sh init-token LABEL PIN_FILE
#                                initialise a new token labelled LABEL in the first free slot
#                                of $SOFTHSM2_CONF's token directory, with the user PIN in
#                                PIN_FILE and a random security officer PIN that is not kept
#                                (softhsm2-util takes both on its command line, which other local
#                                users can read: for test and development tokens only)
#
# Only stdout carries results; every diagnostic goes to stderr.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export OPLEDGER_LOG_PREFIX="hsm.sh"

MODULE=/usr/lib/softhsm/libsofthsm2.so

usage() {
    sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

ensure_installed() {
    if [[ ! -r "$MODULE" ]] || ! command -v softhsm2-util >/dev/null 2>&1; then
        local sudo=()
        if [[ "$(id -u)" != 0 ]]; then
            command -v sudo >/dev/null 2>&1 ||
                die "softhsm2 is not installed and this is not root: apt-get install -y softhsm2"
            sudo=(sudo)
        fi
        log "installing softhsm2 with apt-get"
        "${sudo[@]+"${sudo[@]}"}" env DEBIAN_FRONTEND=noninteractive apt-get update >&2
        "${sudo[@]+"${sudo[@]}"}" env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y --no-install-recommends softhsm2 >&2
    fi
    [[ -r "$MODULE" ]] || die "$MODULE is missing after installing softhsm2"
    printf '%s\n' "$MODULE"
}

conf() {
    local dir="${1:?usage: hsm.sh conf DIR}"
    mkdir -p "$dir/tokens"
    chmod 700 "$dir" "$dir/tokens"
    dir="$(cd "$dir" && pwd)"
    cat >"$dir/softhsm2.conf" <<CONF
directories.tokendir = $dir/tokens
objectstore.backend = file
log.level = ERROR
slots.removable = false
CONF
    printf '%s\n' "$dir/softhsm2.conf"
}

init_token() {
    local label="${1:?usage: hsm.sh init-token LABEL PIN_FILE}" pin_file="${2:?usage: hsm.sh init-token LABEL PIN_FILE}"
    [[ -n "${SOFTHSM2_CONF:-}" ]] || die "SOFTHSM2_CONF is not set: create one with 'hsm.sh conf DIR'"
    [[ -r "$pin_file" ]] || die "cannot read the PIN file"
    local pin so_pin
    pin="$(tr -d '\r\n' <"$pin_file")"
    [[ -n "$pin" ]] || die "the PIN file is empty"
    so_pin="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    softhsm2-util --init-token --free --label "$label" --so-pin "$so_pin" --pin "$pin" >&2
    printf '%s\n' "$label"
}

cmd="${1:-}"
shift || true
case "$cmd" in
    ensure-installed) ensure_installed ;;
    conf) conf "$@" ;;
    init-token) init_token "$@" ;;
    *) usage ;;
esac
