#!/usr/bin/env bash
# Builds the Docker image as shipped and runs it, where a Docker engine runs and the two base
# images (rust:1.95-bookworm, debian:bookworm-slim) are present; anywhere else it says what is
# missing and exits 0 at once. It never starts an engine and never pulls or builds a base image.
#
# With them it checks, failing on the first miss:
#   - `docker build` of the repository's Dockerfile (the commit as ROOM_SERVICE_GIT_COMMIT), and
#     of fakes/Dockerfile (the fakes' image, which compose runs too);
#   - `--version` names that commit;
#   - `serve` (SQLite in the container, publishing to a `fake-im` container, `fake-wallet`
#     beside them on a private network) turns healthy, runs as uid 10001, and answers the
#     README's first five minutes: create, join, gift, the room (heat 1000), its members, the
#     outbox stats and /metrics on the admin listener (bearer token), IM received the events;
#   - `docker stop` ends each of the three containers (serve, fake-im, fake-wallet) with exit
#     code 0 within the stop grace.
# Everything it creates is removed at exit, but the images (tags room-service:check and
# room-service-fakes:check) and the build cache, which make the next build take minutes instead of many.
#
#   scripts/check-image.sh          # DOCKER=/path/to/docker to choose the client
#
# The client: $DOCKER, else /usr/bin/docker (Docker 20.10: BuildKit built in), else `docker`
# on PATH; BuildKit is asked for (DOCKER_BUILDKIT=1): the Dockerfile's cache mounts need it.
set -euo pipefail
cd "$(dirname "$0")/.."

BASES=(rust:1.95-bookworm debian:bookworm-slim)
IMAGE=room-service:check
FAKES_IMAGE=room-service-fakes:check
GRACE=10 # seconds docker stop waits before it kills
RUN_ID="room-check-$$"

skip() {
    echo "check-image: image NOT checked: $*" >&2
    exit 0
}

docker=${DOCKER:-}
if [ -z "$docker" ]; then
    if [ -x /usr/bin/docker ]; then docker=/usr/bin/docker; else docker=$(command -v docker || true); fi
fi
[ -n "$docker" ] && command -v "$docker" >/dev/null || skip "no Docker client installed"
# A client without a running engine answers within a second or two; the timeout bounds a hung one.
timeout 10 "$docker" info >/dev/null 2>&1 || skip "no Docker engine is running (start dockerd to check the image)"
for base in "${BASES[@]}"; do
    "$docker" image inspect "$base" >/dev/null 2>&1 || skip "base image $base is not present (pull it, or make a local stand-in)"
done
export DOCKER_BUILDKIT=1

fail() {
    echo "check-image: FAILED: $*" >&2
    for c in svc im wallet; do
        "$docker" logs --tail 20 "$RUN_ID-$c" 2>&1 | sed "s/^/check-image: [$c] /" >&2 || true
    done
    exit 1
}

cleanup() {
    "$docker" rm -f "$RUN_ID-svc" "$RUN_ID-im" "$RUN_ID-wallet" >/dev/null 2>&1 || true
    "$docker" network rm "$RUN_ID" >/dev/null 2>&1 || true
}
trap cleanup EXIT

commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
started=$(date +%s)
echo "check-image: building $IMAGE at commit $commit"
"$docker" build --build-arg ROOM_SERVICE_GIT_COMMIT="$commit" -t "$IMAGE" . || fail "docker build"
echo "check-image: built in $(($(date +%s) - started)) s"
"$docker" build -f fakes/Dockerfile -t "$FAKES_IMAGE" . || fail "docker build of fakes/Dockerfile"
echo "check-image: $FAKES_IMAGE built ($(($(date +%s) - started)) s since the first build started)"

version=$("$docker" run --rm "$IMAGE" --version) || fail "room-service --version"
[[ "$version" == *"commit ${commit:0:12}"* ]] || fail "--version says '$version', not commit ${commit:0:12}"
echo "check-image: --version: $version"

"$docker" network create "$RUN_ID" >/dev/null || fail "docker network create"
key=check-secret-key
token=check-admin-token
"$docker" run -d --name "$RUN_ID-im" --network "$RUN_ID" --network-alias fake-im \
    -e ROOM_SERVICE_FAKE_IM_SECRET_KEY="$key" "$FAKES_IMAGE" fake-im --listen 0.0.0.0:9000 >/dev/null ||
    fail "starting fake-im"
"$docker" run -d --name "$RUN_ID-wallet" --network "$RUN_ID" --network-alias fake-wallet \
    "$FAKES_IMAGE" fake-wallet --listen 0.0.0.0:7000 --initial-balance 5000 >/dev/null ||
    fail "starting fake-wallet"
"$docker" run -d --name "$RUN_ID-svc" --network "$RUN_ID" \
    -e ROOM_SERVICE__DATABASE__URL='sqlite:///app/data/rooms.db?mode=rwc' \
    -e ROOM_SERVICE__TENCENT_IM__BASE_URL=http://fake-im:9000 \
    -e ROOM_SERVICE__TENCENT_IM__SECRET_KEY="$key" \
    -e ROOM_SERVICE__HTTP__ADMIN_TOKEN="$token" \
    "$IMAGE" >/dev/null || fail "starting serve"

# Within the service's container (curl is in the image, for its HEALTHCHECK): no published
# ports, so nothing depends on the host's port forwarding.
in_svc() { "$docker" exec "$RUN_ID-svc" "$@"; }
post() { in_svc curl -fsS -XPOST "http://127.0.0.1:8080$1" -H 'content-type: application/json' -d "$2"; }

health=starting
for _ in $(seq 60); do
    health=$("$docker" inspect -f '{{.State.Health.Status}}' "$RUN_ID-svc" 2>/dev/null || echo gone)
    [ "$health" = healthy ] && break
    [ "$health" = gone ] || [ "$health" = unhealthy ] && break
    sleep 1
done
[ "$health" = healthy ] || fail "serve is $health, not healthy, after 60 s"
echo "check-image: serve is healthy ($(($(date +%s) - started)) s since the build started)"

uid=$(in_svc id -u) || fail "id -u in the container"
[ "$uid" = 10001 ] || fail "serve runs as uid $uid, not 10001"
echo "check-image: serve runs as uid $uid"

answer=$(post /v1/rooms '{"command_id":"c1","room_id":"r1","owner_id":"alice","title":"Friday night"}') ||
    fail "POST /v1/rooms"
[[ "$answer" == *'"applied":true'* ]] || fail "create: $answer"
post /v1/rooms/r1/join '{"command_id":"c2","user_id":"bob"}' >/dev/null || fail "POST join"
post /v1/rooms/r1/gifts \
    '{"command_id":"c3","sender_id":"bob","receiver_id":"alice","gift_id":"rocket","count":2,"unit_value":500}' \
    >/dev/null || fail "POST gifts"
room=$(in_svc curl -fsS http://127.0.0.1:8080/v1/rooms/r1) || fail "GET the room"
[[ "$room" == *'"heat":1000'* && "$room" == *'"member_count":1'* ]] || fail "the room: $room"
members=$(in_svc curl -fsS 'http://127.0.0.1:8080/v1/rooms/r1/members?limit=100') || fail "GET members"
[[ "$members" == *'"bob"'* ]] || fail "members: $members"
auth="authorization: Bearer $token"
in_svc curl -fsS http://127.0.0.1:9091/admin/outbox/stats -H "$auth" >/dev/null || fail "GET /admin/outbox/stats"
metrics=$(in_svc curl -fsS http://127.0.0.1:9091/metrics -H "$auth") || fail "GET /metrics"
[[ "$metrics" == *room_outbox_publish_success_total* ]] || fail "/metrics has no publish counters"
received=$(in_svc curl -fsS http://fake-im:9000/fake/messages) || fail "GET the fake IM's messages"
[[ "$received" == *RoomUserJoined* ]] || fail "the fake IM received no join: $received"
in_svc curl -fsS http://fake-wallet:7000/fake/stats >/dev/null || fail "the fake wallet does not answer"
echo "check-image: the README walk passed (create, join, gift, room, members, outbox stats, metrics, IM received)"

for c in svc im wallet; do
    t0=$(date +%s%N)
    "$docker" stop -t "$GRACE" "$RUN_ID-$c" >/dev/null || fail "docker stop $c"
    ms=$((($(date +%s%N) - t0) / 1000000))
    code=$("$docker" inspect -f '{{.State.ExitCode}}' "$RUN_ID-$c")
    [ "$code" = 0 ] || fail "$c exited $code on docker stop (after $ms ms)"
    [ "$ms" -lt $((GRACE * 1000)) ] || fail "$c took $ms ms to stop: killed at the grace"
    echo "check-image: docker stop $c: exit 0 in $ms ms"
done
echo "check-image: ok: built, --version, healthy, uid 10001, README walk, docker stop exit 0 (total $(($(date +%s) - started)) s)"
