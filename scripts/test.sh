#!/usr/bin/env bash
# The whole test suite: starts what the tests need (MariaDB), then formatting, lints and
# every test (unit tests, and the integration binary against real MariaDB, real SQLite files
# and the fake Tencent IM over loopback HTTP).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/ensure-mariadb.sh
export ROOM_SERVICE_TEST_MYSQL_URL="${ROOM_SERVICE_TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306}"

cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
cargo test --all-targets --locked
cargo run --locked --bin room-service-bench -- --smoke
