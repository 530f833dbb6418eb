#!/usr/bin/env bash
# Checks the Prometheus alert rules with a real promtool: `check rules` (syntax, PromQL) and
# `test rules` (the unit tests in dashboards/alerts_test.yml, one firing and one quiet case per
# alert). Installs Debian's `prometheus` package (promtool, and the prometheus binary the
# observability integration test starts on a loopback port) when promtool is absent and this
# is root. The dashboard JSON itself is checked by `cargo test --test it observability`.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v promtool >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "promtool is not installed and this is not root: install Debian's prometheus package" >&2
        exit 1
    fi
    echo "Installing prometheus (promtool)..." >&2
    # Keep the packaged service from starting on :9090: nothing here needs it running.
    policy=/usr/sbin/policy-rc.d
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod +x "$policy"
        trap 'rm -f "$policy"' EXIT
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null
fi

promtool check rules dashboards/alerts.yml
promtool test rules dashboards/alerts_test.yml
