#!/usr/bin/env bash
# Fails, naming them, when processes the tests started are still alive: anything running an
# executable under this checkout's target/ (room-service serve, fake-im, fake-wallet, the bench
# and fault harnesses and what they spawn), and the helpers the tests start from the checkout
# (redis-server, prometheus, the Python peers of tests/peer/). Those left over are killed, so
# the next run starts clean. The script's own ancestors (cargo, this run) are not counted.
#
#   scripts/check-leaks.sh        # exit 0: none left; exit 1: each leftover named and killed
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd -P)"

# This shell and its ancestors.
declare -A mine=()
pid=$$
while [ "$pid" -gt 1 ] 2>/dev/null; do
    mine[$pid]=1
    pid="$(awk '{print $4}' "/proc/$pid/stat" 2>/dev/null || echo 0)"
done

leaked=()
for dir in /proc/[0-9]*; do
    pid="${dir#/proc/}"
    [ -n "${mine[$pid]:-}" ] && continue
    exe="$(readlink "$dir/exe" 2>/dev/null)" || continue
    # A zombie has no executable left to read; a stopped or running process does.
    cwd="$(readlink "$dir/cwd" 2>/dev/null || true)"
    cmd="$(tr '\0' ' ' <"$dir/cmdline" 2>/dev/null || true)"
    ours=false
    case "$exe" in
        "$root"/target/*) ours=true ;;
    esac
    if [ "$cwd" = "$root" ]; then
        case "${exe##*/}" in
            redis-server | prometheus) ours=true ;;
            python3*) [[ "$cmd" == *tests/peer/* ]] && ours=true ;;
        esac
    fi
    if $ours; then
        leaked+=("$pid")
        echo "check-leaks: still running after the tests: pid $pid: ${cmd:-$exe}" >&2
    fi
done

if [ "${#leaked[@]}" -gt 0 ]; then
    kill -KILL "${leaked[@]}" 2>/dev/null || true
    echo "check-leaks: ${#leaked[@]} process(es) the tests started outlived them (now killed)" >&2
    exit 1
fi
echo "check-leaks: no process the tests started is left"
