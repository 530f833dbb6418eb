#!/usr/bin/env bash
# Validates docker-compose.yml (syntax, schema, interpolation) without a Docker engine:
# `docker compose config -q` when the compose plugin exists, else `docker-compose config -q`,
# installing Debian's docker-compose package first when neither is present (root only).
set -euo pipefail
cd "$(dirname "$0")/.."

if docker compose version >/dev/null 2>&1; then
    compose=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
    compose=(docker-compose)
elif [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "check-compose: installing docker-compose (Debian package)" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null
    compose=(docker-compose)
else
    echo "check-compose: no docker compose and not root to install docker-compose" >&2
    exit 1
fi

"${compose[@]}" -f docker-compose.yml config -q
# The Galera variant, layered on the main file (docs/DEPLOY-HA.md).
"${compose[@]}" -f docker-compose.yml -f docker-compose.galera.yml config -q
# Every published port is bound to loopback, and the admin listener (9091) is never published.
"${compose[@]}" -f docker-compose.yml -f docker-compose.galera.yml config | python3 -c '
import sys, yaml
bad = []
for name, service in (yaml.safe_load(sys.stdin).get("services") or {}).items():
    for port in service.get("ports") or []:
        text = port if isinstance(port, str) else "{}:{}:{}".format(port.get("host_ip", ""), port.get("published", ""), port.get("target", ""))
        if not text.startswith("127.0.0.1:"):
            bad.append(f"{name}: {text} is not bound to 127.0.0.1")
        if str(text).rsplit(":", 1)[-1].split("/")[0] == "9091":
            bad.append(f"{name}: {text} publishes the admin listener")
if bad:
    sys.exit("check-compose: " + "; ".join(bad))
'
echo "check-compose: docker-compose.yml (and with docker-compose.galera.yml) is valid (${compose[*]}); published ports are loopback-only"
