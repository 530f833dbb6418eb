#!/usr/bin/env bash
# The whole test suite: starts what the tests need (MariaDB), then formatting, lints and
# every test (unit tests, and the integration binary against real MariaDB, real SQLite files
# and the fake Tencent IM over loopback HTTP), then the fault matrix; at exit, the check that
# no process the tests started is left running.
set -euo pipefail
cd "$(dirname "$0")/.."
# Last, however the run ends (a failed step included): no process the tests started may
# outlive them; scripts/check-leaks.sh names and kills any left, and fails the run.
trap 'status=$?; scripts/check-leaks.sh || status=1; exit "$status"' EXIT

scripts/ensure-mariadb.sh
# The independent Tencent IM peer (tests/peer) checks usersigs with Tencent's official package.
python3 -c "import TLSSigAPIv2" 2>/dev/null ||
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore tls-sig-api-v2==1.1
# The independent token maker (tests/peer/tokens.py) signs JWTs with PyJWT, keys made by cryptography.
python3 -c "import jwt, cryptography" 2>/dev/null ||
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
        PyJWT==2.15.1 cryptography==50.0.2
# The independent gRPC client (tests/peer/grpc_client.py) generates its stubs with grpcio-tools;
# the reflection client (tests/peer/grpc_reflection_client.py) is grpcio-reflection's.
python3 -c "import grpc, grpc_tools, grpc_reflection" 2>/dev/null ||
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
        grpcio==1.85.1 grpcio-tools==1.85.1 grpcio-reflection==1.85.1
# The independent OTLP trace receiver (tests/peer/otlp_receiver.py) serves opentelemetry-proto's
# TraceService with grpcio.
python3 -c "import opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc" 2>/dev/null ||
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
        opentelemetry-proto==1.45.2
# The clock-skew fault row runs nodes under faketime (Debian's faketime package).
if ! command -v faketime >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "faketime is not installed and this is not root: install Debian's faketime package" >&2
        exit 1
    fi
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq faketime >/dev/null
fi
# The Galera rows of the fault matrix (docs/DEPLOY-HA.md) put HAProxy (Debian's haproxy) in front
# of a loopback MariaDB Galera cluster (galera-4, installed with mariadb-server here).
if ! command -v haproxy >/dev/null 2>&1 && ! [ -x /usr/sbin/haproxy ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "haproxy is not installed and this is not root: install Debian's haproxy package" >&2
        exit 1
    fi
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >/dev/null
    # Debian starts the packaged service; the rows run their own.
    service haproxy stop >/dev/null 2>&1 || true
fi
scripts/check-dashboards.sh
export ROOM_SERVICE_TEST_MYSQL_URL="${ROOM_SERVICE_TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306}"

scripts/check-compose.sh
# The Docker build context (no engine here): broken contexts must fail, the real one passes
# cargo check --release in target/docker-context-check (minutes the first time, then seconds).
scripts/check-docker-context.sh --self-test
# The fakes' image (compose, scripts/check-image.sh): its own allowlist, the fakes' crate.
DOCKER_CONTEXT_DOCKERIGNORE=fakes/Dockerfile.dockerignore DOCKER_CONTEXT_PACKAGE=room-service-fakes \
    scripts/check-docker-context.sh fakes/Dockerfile
# The image itself, built and run, where an engine runs and the base images are present
# (scripts/check-image.sh); elsewhere (CI: no engine running) it says so and exits 0 at once.
# It never starts an engine nor builds a base image.
scripts/check-image.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The API docs: a broken intra-doc link fails the run.
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --lib --locked -p room-service -p room-service-fakes
# The benchmark harness in smoke mode (tiny sizes): proves it works, measures nothing. B10
# spawns the room-service and room-service-fakes binaries next to it, so all are built first.
cargo build --locked -p room-service -p room-service-fakes -p room-service-bench
cargo run --locked -p room-service-bench -- --smoke
# Every test; a hung test must fail the run well inside CI's limit, not eat it.
timeout 1200 cargo test --workspace --lib --bins --tests --locked
# The fault matrix (docs/RELIABILITY.md), full sizes, about 2 minutes: private MariaDB servers
# killed and frozen, services frozen, terminated and killed under load; exits non-zero when
# anything acknowledged is lost or a promise is broken. It spawns the room-service binary, so
# both are built first (cargo run builds only the harness).
cargo build --locked -p room-service -p room-service-faults
timeout 600 cargo run --locked -p room-service-faults
