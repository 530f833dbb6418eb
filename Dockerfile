# room-service image: a release build on the Rust image, run on debian:bookworm-slim as a
# non-root user. Build: `docker build -t room-service .` (docker-compose.yml does it for you).
# Needs BuildKit (the default builder since Docker 23; DOCKER_BUILDKIT=1 before) for the RUN
# cache mounts, which its built-in Dockerfile frontend understands: there is no `# syntax=`
# line, which would pull a frontend image from Docker Hub on every build and fail offline.
# scripts/check-image.sh builds and runs this image where an engine is running.

ARG RUST_VERSION=1.95

# ---- build ---------------------------------------------------------------------------------
FROM rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src

# What cargo needs to build the service: its crate (Cargo.toml, src/); `sqlx::migrate!` embeds
# migrations/ at compile time; build.rs generates the gRPC code from proto/ (with protox: no
# protoc in the image). The workspace's other members (the fakes, the benchmark and fault
# harnesses) are not built: cargo reads their manifests to load the workspace and the lock
# file, and needs none of their code. `build.rs*` copies a build script when the crate has one
# and nothing otherwise (Cargo.toml always matches, so the COPY never comes up empty).
# scripts/check-docker-context.sh rebuilds this layout from these COPY lines and .dockerignore
# and runs cargo in it (CI runs it).
COPY Cargo.toml Cargo.lock build.rs* ./
COPY fakes/Cargo.toml ./fakes/
COPY bench/Cargo.toml ./bench/
COPY faults/Cargo.toml ./faults/
COPY src ./src
COPY migrations ./migrations
COPY proto ./proto

# The commit for a build script (build.rs, when there is one) to embed; .git is not in the
# context, so it comes as a build argument, set for cargo below:
#   docker build --build-arg ROOM_SERVICE_GIT_COMMIT="$(git rev-parse HEAD)" -t room-service .
ARG ROOM_SERVICE_GIT_COMMIT=unknown

# Only the service. The cache mounts keep the crates.io registry and target/ between
# builds (dependencies are compiled once, then only our crate), so no placeholder dependency
# layer is needed. target/ is a cache mount, absent from the image: the binary is copied out
# of it within this RUN.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    ROOM_SERVICE_GIT_COMMIT="${ROOM_SERVICE_GIT_COMMIT}" \
        cargo build --release --locked -p room-service --bin room-service \
    && cp target/release/room-service /usr/local/bin/room-service \
    && strip /usr/local/bin/room-service

# ---- runtime -------------------------------------------------------------------------------
FROM debian:bookworm-slim AS runtime

# ca-certificates: TLS to Tencent IM; curl: the HEALTHCHECK below.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/*

RUN groupadd --system --gid 10001 room \
    && useradd --system --uid 10001 --gid room --home-dir /app --shell /usr/sbin/nologin room \
    && mkdir -p /app/data \
    && chown room:room /app/data

COPY --from=build /usr/local/bin/room-service /usr/local/bin/room-service
COPY config/ /etc/room-service/
# The default --config path (config/config.yaml) resolves here too; data/ holds a SQLite file
# when the embedded database is used.
COPY config/ /app/config/

USER room:room
WORKDIR /app
# 8080: the API (/v1, /healthz, /readyz). 50051: the gRPC API (grpc.listen). 9091: the admin listener (http.admin_listen:
# /admin/* and /metrics, behind a bearer token) when the config binds it to 0.0.0.0 inside the
# container; docker-compose.yml never publishes it on the host.
EXPOSE 8080 50051 9091

# Liveness only (/readyz turns 503 while draining, which is not a reason to restart).
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1

ENTRYPOINT ["room-service"]
CMD ["--config", "/etc/room-service/config.docker.yaml", "serve"]
