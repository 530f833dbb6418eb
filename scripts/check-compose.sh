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
echo "check-compose: docker-compose.yml is valid (${compose[*]})"
