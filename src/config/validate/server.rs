//! The rules of the service's edges and infrastructure: `http`, `grpc`, `database`, `redis`,
//! `log`, `telemetry`.

use super::*;

pub(super) fn http(p: &mut Problems, raw: RawHttp) -> HttpSettings {
    let listen = raw.listen.trim().parse::<SocketAddr>().unwrap_or_else(|e| {
        p.add("http.listen", format!("{:?} is not an ip:port address ({e})", raw.listen));
        SocketAddr::from(([127, 0, 0, 1], 8080))
    });
    if raw.body_limit_bytes == 0 {
        p.add("http.body_limit_bytes", "must be greater than zero");
    }
    let admin_listen = raw.admin_listen.trim().parse::<SocketAddr>().unwrap_or_else(|e| {
        p.add("http.admin_listen", format!("{:?} is not an ip:port address ({e})", raw.admin_listen));
        SocketAddr::from(([127, 0, 0, 1], 9091))
    });
    let admin_token = Secret::new(raw.admin_token.expose().trim());
    let admin_token = (!admin_token.is_empty()).then_some(admin_token);
    if admin_token.is_none() && !admin_listen.ip().is_loopback() {
        p.add(
            "http.admin_listen",
            format!(
                "{admin_listen} is not a loopback address: set http.admin_token \
                 (ROOM_SERVICE__HTTP__ADMIN_TOKEN) or listen on 127.0.0.1"
            ),
        );
    }
    if admin_listen == listen && listen.port() != 0 {
        p.add("http.admin_listen", "must differ from http.listen");
    }
    let mut limit = |key: &str, value: i64| match usize::try_from(value) {
        Ok(n) if (1..=MAX_HTTP_LIMIT).contains(&n) => n,
        _ => {
            p.add(key, format!("{value} is not between 1 and {MAX_HTTP_LIMIT}"));
            1
        }
    };
    let max_in_flight = limit("http.max_in_flight", raw.max_in_flight);
    let max_connections = limit("http.max_connections", raw.max_connections);
    let request_timeout = p.positive("http.request_timeout", &raw.request_timeout, Duration::from_secs(10));
    let idle_timeout = p.positive("http.idle_timeout", &raw.idle_timeout, Duration::from_secs(30));
    if idle_timeout <= request_timeout {
        // A request being handled may leave the connection silent until its answer.
        p.add("http.idle_timeout", "must be longer than http.request_timeout");
    }
    HttpSettings {
        listen,
        body_limit_bytes: raw.body_limit_bytes,
        admin_listen,
        admin_token,
        request_timeout,
        max_in_flight,
        max_connections,
        idle_timeout,
        shutdown_grace: p.or_default("http.shutdown_grace", &raw.shutdown_grace, Duration::ZERO),
        shutdown_timeout: p.positive("http.shutdown_timeout", &raw.shutdown_timeout, Duration::from_secs(10)),
    }
}

pub(super) fn grpc(p: &mut Problems, raw: RawGrpc, http: &RawHttp) -> GrpcSettings {
    let listen = raw.listen.trim().parse::<SocketAddr>().unwrap_or_else(|e| {
        p.add("grpc.listen", format!("{:?} is not an ip:port address ({e})", raw.listen));
        SocketAddr::from(([127, 0, 0, 1], 50051))
    });
    let taken =
        [&http.listen, &http.admin_listen].into_iter().filter_map(|a| a.trim().parse::<SocketAddr>().ok());
    if listen.port() != 0 && taken.into_iter().any(|a| a == listen) {
        p.add("grpc.listen", "must differ from http.listen and http.admin_listen");
    }
    GrpcSettings { listen }
}

pub(super) fn database(p: &mut Problems, raw: RawDatabase) -> DatabaseSettings {
    // The value never goes into a message: it may carry a password.
    let url = Secret::new(raw.url.expose().trim());
    if Backend::from_url(url.expose()).is_none() {
        p.add("database.url", "must start with sqlite:, mysql:// or mariadb://");
    }
    if raw.max_connections == 0 {
        p.add("database.max_connections", "must be at least 1");
    }
    DatabaseSettings { url, max_connections: raw.max_connections, run_migrations: raw.run_migrations }
}

pub(super) fn log(p: &mut Problems, raw: RawLog) -> LogSettings {
    let format = match raw.format.trim().to_ascii_lowercase().as_str() {
        "json" => LogFormat::Json,
        "pretty" => LogFormat::Pretty,
        _ => {
            p.add("log.format", format!("{:?} is neither \"json\" nor \"pretty\"", raw.format));
            LogFormat::Json
        }
    };
    let level = raw.level.trim().to_owned();
    if let Err(reason) = check_log_level(&level) {
        p.add("log.level", reason);
    }
    LogSettings { format, level }
}

pub(super) fn telemetry(p: &mut Problems, raw: RawTelemetry) -> TelemetrySettings {
    let raw = raw.otlp;
    let endpoint = raw.endpoint.trim();
    let sample_ratio = raw.sample_ratio;
    if !(0.0..=1.0).contains(&sample_ratio) {
        p.add("telemetry.otlp.sample_ratio", format!("{sample_ratio} is not between 0.0 and 1.0"));
    }
    let timeout = p.positive("telemetry.otlp.timeout", &raw.timeout, Duration::from_secs(10));
    let forced_per_sec =
        u32::try_from(raw.forced_per_sec).ok().filter(|n| *n <= MAX_FORCED_PER_SEC).unwrap_or_else(|| {
            let value = raw.forced_per_sec;
            p.add(
                "telemetry.otlp.forced_per_sec",
                format!("{value} is not between 0 and {MAX_FORCED_PER_SEC}"),
            );
            0
        });
    let max_queue_spans = usize::try_from(raw.max_queue_spans)
        .ok()
        .filter(|n| (1..=MAX_QUEUE_SPANS).contains(n))
        .unwrap_or_else(|| {
            let value = raw.max_queue_spans;
            p.add(
                "telemetry.otlp.max_queue_spans",
                format!("{value} is not between 1 and {MAX_QUEUE_SPANS}"),
            );
            1
        });
    if endpoint.is_empty() {
        return TelemetrySettings { otlp: None };
    }
    let endpoint = check_base_url(endpoint).unwrap_or_else(|reason| {
        p.add("telemetry.otlp.endpoint", reason);
        String::new()
    });
    if endpoint.starts_with("https://") {
        p.add(
            "telemetry.otlp.endpoint",
            "https:// is not supported: export over http:// to a collector on this host or network \
             (the OpenTelemetry Collector, a Jaeger or Tempo agent), which forwards over TLS",
        );
    }
    TelemetrySettings {
        otlp: Some(OtlpSettings { endpoint, sample_ratio, timeout, forced_per_sec, max_queue_spans }),
    }
}

pub(super) fn redis(p: &mut Problems, raw: RawRedis) -> Option<RedisSettings> {
    // The value never goes into a message: it may carry a password.
    let url = Secret::new(raw.url.expose().trim());
    if url.is_empty() {
        return None;
    }
    if !["redis://", "rediss://", "unix://", "redis+unix://"].iter().any(|s| url.expose().starts_with(s)) {
        p.add("redis.url", "must start with redis://, rediss:// or unix://");
    }
    Some(RedisSettings { url })
}
