//! Every metric name and label key the service exports (SPEC §10), in one place.
//!
//! Code records metrics only through these constants; the Grafana dashboard and the Prometheus
//! alert rules in `dashboards/` are checked against them. Label values are always bounded
//! (`path`, `event_type`, `class`, `result`, `status`, `command`, `transport`, `state`; one `version` and
//! `commit` per build), never a room id, a user id or an error text. [`describe_all`](super::describe::describe_all) registers units and help texts once at startup, and
//! [`LATENCY_BUCKETS`] gives histograms real buckets (the Prometheus exporter renders summaries
//! otherwise).

/// Counter: publishes that succeeded, by `path`, `event_type`, `result` (delivered|skipped).
pub const PUBLISH_SUCCESS_TOTAL: &str = "room_outbox_publish_success_total";
/// Counter: publishes that failed, by `path`, `event_type`, `class`.
pub const PUBLISH_FAILURE_TOTAL: &str = "room_outbox_publish_failure_total";
/// Histogram (seconds): time of one publish through the stack, by `path`, `event_type`.
pub const PUBLISH_LATENCY_SECONDS: &str = "room_outbox_publish_latency_seconds";
/// Gauge: outbox rows by `status` (pending, delivering, retryable, failed; never delivered).
pub const OUTBOX_ROWS: &str = "room_outbox_rows";
/// Gauge (seconds): age of the oldest outbox row not yet delivered.
pub const OUTBOX_OLDEST_PENDING_AGE_SECONDS: &str = "room_outbox_oldest_pending_age_seconds";
/// Counter: outbox rows claimed by the worker.
pub const OUTBOX_CLAIMED_TOTAL: &str = "room_outbox_claimed_total";
/// Counter: worker marks that found their lease lost (the row was reclaimed elsewhere).
pub const OUTBOX_LEASE_LOST_TOTAL: &str = "room_outbox_lease_lost_total";
/// Counter: delivered outbox rows deleted by the retention purge (and `outbox purge-delivered`).
pub const OUTBOX_PURGED_ROWS_TOTAL: &str = "room_outbox_purged_rows_total";
/// Counter: room commands handled, by `command`, `result`, `transport` (http|grpc|internal).
pub const COMMANDS_TOTAL: &str = "room_commands_total";
/// Histogram (seconds): time to handle one room command, by `command`.
pub const COMMAND_LATENCY_SECONDS: &str = "room_command_latency_seconds";
/// Counter: HTTP requests served, by `method`, `route`, `status`.
pub const HTTP_REQUESTS_TOTAL: &str = "http_requests_total";
/// Histogram (seconds): HTTP request duration, by `method`, `route`, `status`.
pub const HTTP_REQUEST_DURATION_SECONDS: &str = "http_request_duration_seconds";
/// Counter: `/v1/*` requests refused with 503 `overloaded` (`http.max_in_flight` reached).
pub const HTTP_REQUESTS_SHED_TOTAL: &str = "room_http_requests_shed_total";
/// Counter: `/v1/*` requests answered 503 `request_timeout` (`http.request_timeout`).
pub const HTTP_REQUEST_TIMEOUTS_TOTAL: &str = "room_http_request_timeouts_total";
/// Counter: request handlers that panicked (answered 500; the process kept serving).
pub const HTTP_PANICS_TOTAL: &str = "room_http_panics_total";
/// Gauge: open HTTP connections, by `listener` (`public`, `admin`, `grpc`).
pub const HTTP_CONNECTIONS: &str = "room_http_connections";
/// Counter: connections refused with a 503 because `http.max_connections` were open, by
/// `listener`.
pub const HTTP_CONNECTIONS_REFUSED_TOTAL: &str = "room_http_connections_refused_total";

/// Counter: outbox rows parked as `failed`, by event type and reason.
pub const OUTBOX_PARKED_TOTAL: &str = "room_outbox_parked_total";
/// Gauge: 1 while the worker has stopped publishing, by reason (`configuration`).
pub const OUTBOX_PUBLISH_PAUSED: &str = "room_outbox_publish_paused";
/// Gauge: 1 while Redis is away and this node takes its IM permits from its own share of the
/// app-wide quota (`global_per_sec / cluster.expected_nodes`); 0 while the cluster shares it.
/// Exported with `redis.url` set, from the first publish on; Redis is tried again on a publish
/// at least a second after the last try, so an idle node keeps its last value.
pub const IM_QUOTA_FALLBACK: &str = "room_im_quota_fallback";

/// Gauge: always 1, labelled with the `version` and `commit` the binary was built from
/// (`crate::build`), so dashboards can show what runs where.
pub const BUILD_INFO: &str = "room_service_build_info";

/// Gauge: database pool connections by `state` (`idle` | `in_use`).
pub const DB_POOL_CONNECTIONS: &str = "room_db_pool_connections";
/// Gauge: the most connections the pool opens (`database.max_connections`).
pub const DB_POOL_MAX_CONNECTIONS: &str = "room_db_pool_max_connections";
/// Counter: connection acquisitions that waited the whole acquire timeout (5 s) and failed,
/// every connection being in use.
pub const DB_POOL_ACQUIRE_TIMEOUTS_TOTAL: &str = "room_db_pool_acquire_timeouts_total";

/// Counter (seconds): user and system CPU time of the process (whole seconds; from
/// `metrics-process`, like every `process_*` name, with the standard Prometheus names).
pub const PROCESS_CPU_SECONDS_TOTAL: &str = "process_cpu_seconds_total";
/// Gauge (bytes): resident memory (RSS).
pub const PROCESS_RESIDENT_MEMORY_BYTES: &str = "process_resident_memory_bytes";
/// Gauge (bytes): virtual memory size.
pub const PROCESS_VIRTUAL_MEMORY_BYTES: &str = "process_virtual_memory_bytes";
/// Gauge (bytes): the virtual memory limit (`ulimit -v`; 0 when unlimited).
pub const PROCESS_VIRTUAL_MEMORY_MAX_BYTES: &str = "process_virtual_memory_max_bytes";
/// Gauge: open file descriptors (sockets included).
pub const PROCESS_OPEN_FDS: &str = "process_open_fds";
/// Gauge: the open file descriptor limit (`ulimit -n`; 0 when unlimited).
pub const PROCESS_MAX_FDS: &str = "process_max_fds";
/// Gauge: OS threads of the process.
pub const PROCESS_THREADS: &str = "process_threads";
/// Gauge (seconds): process start time, since the Unix epoch.
pub const PROCESS_START_TIME_SECONDS: &str = "process_start_time_seconds";

/// The `process_*` metrics `metrics-process` exports on Linux, sampled every 5 s.
pub const PROCESS: [&str; 8] = [
    PROCESS_CPU_SECONDS_TOTAL,
    PROCESS_RESIDENT_MEMORY_BYTES,
    PROCESS_VIRTUAL_MEMORY_BYTES,
    PROCESS_VIRTUAL_MEMORY_MAX_BYTES,
    PROCESS_OPEN_FDS,
    PROCESS_MAX_FDS,
    PROCESS_THREADS,
    PROCESS_START_TIME_SECONDS,
];

/// Counter: room requests this node forwarded to the room's owner, by `result` (ok|error).
pub const COMMANDS_FORWARDED_TOTAL: &str = "room_commands_forwarded_total";
/// Gauge: shards whose lease this node holds (1024 without a cluster).
pub const CLUSTER_SHARDS_OWNED: &str = "room_cluster_shards_owned";

/// Gauge (seconds): age of the oldest committed event a consumer has not passed, by `consumer`
/// (0 when caught up).
pub const CONSUMER_LAG_SECONDS: &str = "room_consumer_lag_seconds";
/// Gauge: the outbox id up to which a consumer has passed every event, by `consumer`.
pub const CONSUMER_POSITION: &str = "room_consumer_position";

/// Every metric name above, for tests that compare against dashboards and alert rules: the
/// names of [`METRICS`](super::describe::METRICS), so a metric without a unit and help text
/// cannot be declared.
pub const ALL: [&str; 36] = super::describe::names(&super::describe::METRICS);

/// The histograms among [`ALL`]; each gets [`LATENCY_BUCKETS`].
pub const HISTOGRAMS: [&str; 3] =
    [PUBLISH_LATENCY_SECONDS, COMMAND_LATENCY_SECONDS, HTTP_REQUEST_DURATION_SECONDS];

/// Label key: who publishes (`sync` | `worker` | `webhook` | `audit`).
pub const LABEL_PATH: &str = "path";
/// Label key: an event consumer besides IM (`webhook` | `audit`).
pub const LABEL_CONSUMER: &str = "consumer";
/// Label key: the event type (closed set).
pub const LABEL_EVENT_TYPE: &str = "event_type";
/// Label key: outcome of a successful publish (`delivered` | `skipped`), or of a command.
pub const LABEL_RESULT: &str = "result";
/// Label key: the error class of a failed publish (see `publish::ErrorClass`).
pub const LABEL_CLASS: &str = "class";
/// Label key: an outbox row status, or an HTTP status code.
pub const LABEL_STATUS: &str = "status";
/// Label key: the room command name.
pub const LABEL_COMMAND: &str = "command";
/// Label key: where a command came from (`http`, `grpc`, `internal`: the presence worker).
pub const LABEL_TRANSPORT: &str = "transport";
/// Label key: the HTTP method.
pub const LABEL_METHOD: &str = "method";
/// Label key: the matched HTTP route template (never the raw path, which holds ids).
pub const LABEL_ROUTE: &str = "route";
/// Label key: why a row was parked, or why publishing is paused (bounded set).
pub const LABEL_REASON: &str = "reason";
/// Label key: which HTTP listener (`public`, `admin`).
pub const LABEL_LISTENER: &str = "listener";
/// Label key: a pool connection's state (`idle` | `in_use`).
pub const LABEL_STATE: &str = "state";
/// Label key: the crate version of the build.
pub const LABEL_VERSION: &str = "version";
/// Label key: the git commit of the build (12 characters, or `unknown`).
pub const LABEL_COMMIT: &str = "commit";

/// Histogram buckets in seconds, from 1 ms to 10 s (covers a 3 s publish timeout and slow
/// commands).
pub const LATENCY_BUCKETS: &[f64] =
    &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::describe::{
        Kind, METRICS, UNLABELLED_COUNTERS, describe_all, init_unlabelled_counters,
    };
    use metrics::Unit;
    use metrics_util::debugging::DebuggingRecorder;

    #[test]
    fn names_follow_prometheus_conventions() {
        for name in ALL {
            assert!(name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'), "{name}");
        }
        for name in HISTOGRAMS {
            assert!(name.ends_with("_seconds"), "{name}");
        }
        let mut unique = ALL.to_vec();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), ALL.len());
    }

    #[test]
    fn unlabelled_counters_are_exported_at_zero_before_any_event() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::with_local_recorder(&recorder, init_unlabelled_counters);
        let mut counters: Vec<_> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .map(|(key, _, _, value)| (key.key().name().to_owned(), value))
            .collect();
        counters.sort_by(|a, b| a.0.cmp(&b.0));
        let zero = || metrics_util::debugging::DebugValue::Counter(0);
        let mut expected: Vec<_> =
            UNLABELLED_COUNTERS.iter().map(|name| ((*name).to_owned(), zero())).collect();
        expected.extend(["ok", "error"].map(|_| (COMMANDS_FORWARDED_TOTAL.to_owned(), zero())));
        expected.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(counters, expected);
        assert!(expected.iter().any(|(name, _)| name == OUTBOX_LEASE_LOST_TOTAL));
    }

    #[test]
    fn latency_buckets_are_strictly_increasing_seconds() {
        assert!(LATENCY_BUCKETS.windows(2).all(|w| w[0] < w[1]));
        assert!(LATENCY_BUCKETS.first().is_some_and(|b| *b > 0.0));
        assert!(LATENCY_BUCKETS.last().is_some_and(|b| *b >= 3.0));
    }

    #[test]
    fn describe_all_gives_every_metric_a_unit_and_help_text() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::with_local_recorder(&recorder, || {
            describe_all();
            for metric in METRICS {
                match metric.kind {
                    Kind::Histogram => metrics::histogram!(metric.name).record(0.0),
                    Kind::Gauge => metrics::gauge!(metric.name).set(0.0),
                    Kind::Counter => metrics::counter!(metric.name).increment(0),
                }
            }
        });
        let described = snapshotter.snapshot().into_vec();
        assert_eq!(described.len(), ALL.len());
        for (key, unit, help, _) in described {
            let name = key.key().name();
            assert!(unit.is_some() && help.is_some(), "{name} is not described");
            let seconds = name.ends_with("_seconds") || name.ends_with("_seconds_total");
            assert_eq!(unit == Some(Unit::Seconds), seconds, "{name}");
            let bytes = name.ends_with("_bytes");
            assert_eq!(unit == Some(Unit::Bytes), bytes, "{name}");
        }
    }
}
