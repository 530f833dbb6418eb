# syntax=docker/dockerfile:1
# room-service image: a release build on the Rust image, run on debian:bookworm-slim as a
# non-root user. Build: `docker build -t room-service .` (docker-compose.yml does it for you).

ARG RUST_VERSION=1.95

# ---- build ---------------------------------------------------------------------------------
FROM rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src

# Dependency layer: build every dependency against placeholder sources, so that editing our
# code does not rebuild the dependency graph (this layer is reused while Cargo.toml and
# Cargo.lock are unchanged).
COPY Cargo.toml Cargo.lock ./
RUN mkdir src \
    && echo 'fn main() {}' > src/main.rs \
    && echo '' > src/lib.rs \
    && cargo build --release --locked \
    && rm -rf src

# The real build. `sqlx::migrate!` embeds migrations/ at compile time; the touch makes cargo
# rebuild our crate over the placeholder's fingerprints.
COPY src ./src
COPY migrations ./migrations
RUN touch src/main.rs src/lib.rs \
    && cargo build --release --locked \
    && strip target/release/room-service

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

COPY --from=build /src/target/release/room-service /usr/local/bin/room-service
COPY config/ /etc/room-service/
# The default --config path (config/config.yaml) resolves here too; data/ holds a SQLite file
# when the embedded database is used.
COPY config/ /app/config/

USER room:room
WORKDIR /app
EXPOSE 8080

# Liveness only (/readyz turns 503 while draining, which is not a reason to restart).
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1

ENTRYPOINT ["room-service"]
CMD ["--config", "/etc/room-service/config.docker.yaml", "serve"]
