//! Every metric name and label key the service exports (SPEC §10), in one place.
//!
//! Code records metrics only through these constants; the Grafana dashboard and the Prometheus
//! alert rules in `dashboards/` are checked against them. Label values are always bounded
//! (`path`, `event_type`, `class`, `result`, `status`, `command`, `transport`, `state`; one
//! `version` and `commit` per build), never a room id, a user id or an error text. Each metric is
//! one row of the table below: its name, kind, unit, and a doc comment that is also its help
//! text; `describe::describe_all` registers units and help texts once at
//! startup, and [`LATENCY_BUCKETS`] gives histograms real buckets (the Prometheus exporter
//! renders summaries otherwise).

use super::describe::{Kind, Metric, declare_metrics};

declare_metrics! {
    /// Events published successfully, by `path`, `event_type` and `result` (delivered|skipped).
    PUBLISH_SUCCESS_TOTAL: Counter(Count) = "room_outbox_publish_success_total";
    /// Event publishes that failed, by `path`, `event_type` and `class` (the error class).
    PUBLISH_FAILURE_TOTAL: Counter(Count) = "room_outbox_publish_failure_total";
    /// Time of one publish through the stack, by `path` and `event_type`.
    PUBLISH_LATENCY_SECONDS: Histogram(Seconds) = "room_outbox_publish_latency_seconds";
    /// IM calls (send_group_msg; each may carry several events), by `path` and `result`
    /// (delivered, or the error class of a failed call).
    IM_CALLS_TOTAL: Counter(Count) = "room_im_calls_total";
    /// Events carried by one IM call, by `path`.
    IM_EVENTS_PER_CALL: Histogram(Count) = "room_im_events_per_call";
    /// Senders put in quarantine (or kept there) because IM refused one of their events alone
    /// for its content, by `path` where the refusal was seen (sync|worker).
    IM_SENDER_QUARANTINES_TOTAL: Counter(Count) = "room_im_sender_quarantines_total";
    /// Events sent alone, in an IM call of their own, because their sender is in quarantine,
    /// by `path` (sync|worker).
    IM_QUARANTINED_EVENTS_TOTAL: Counter(Count) = "room_im_quarantined_events_total";
    /// Age of the oldest undelivered event of the most lagging room (0: nothing undelivered):
    /// rooms deliver in order, so it is the head of the room furthest behind.
    OUTBOX_HOT_ROOM_LAG_SECONDS: Gauge(Seconds) = "room_outbox_hot_room_lag_seconds";
    /// Outbox rows by `status` (pending, delivering, retryable, failed; never delivered).
    OUTBOX_ROWS: Gauge(Count) = "room_outbox_rows";
    /// Age of the oldest outbox row not yet delivered.
    OUTBOX_OLDEST_PENDING_AGE_SECONDS: Gauge(Seconds) = "room_outbox_oldest_pending_age_seconds";
    /// Outbox rows claimed by the worker.
    OUTBOX_CLAIMED_TOTAL: Counter(Count) = "room_outbox_claimed_total";
    /// Worker marks that changed nothing because the lease was lost (the row was reclaimed elsewhere).
    OUTBOX_LEASE_LOST_TOTAL: Counter(Count) = "room_outbox_lease_lost_total";
    /// Delivered outbox rows deleted by the retention purge (and `outbox purge-delivered`).
    OUTBOX_PURGED_ROWS_TOTAL: Counter(Count) = "room_outbox_purged_rows_total";
    /// Outbox rows parked as failed (never retried until requeued), by `event_type` and `reason`.
    OUTBOX_PARKED_TOTAL: Counter(Count) = "room_outbox_parked_total";
    /// 1 while the outbox worker has stopped publishing, by `reason` (configuration).
    OUTBOX_PUBLISH_PAUSED: Gauge(Count) = "room_outbox_publish_paused";
    // Exported with `redis.url` set, from the first publish on; Redis is tried again on a publish
    // at least a second after the last try, so an idle node keeps its last value.
    /// 1 while Redis is away and this node takes its IM permits from its own share of the
    /// app-wide quota (global_per_sec / cluster.expected_nodes); 0 while the cluster shares it.
    IM_QUOTA_FALLBACK: Gauge(Count) = "room_im_quota_fallback";

    /// Room commands handled, by `command`, `result` and `transport` (http|grpc|internal).
    COMMANDS_TOTAL: Counter(Count) = "room_commands_total";
    /// Time to handle one room command, by `command`.
    COMMAND_LATENCY_SECONDS: Histogram(Seconds) = "room_command_latency_seconds";
    /// Public API requests refused by authentication or authorization, by `reason` (missing,
    /// malformed, bad_signature, expired, not_yet_valid, wrong_issuer, wrong_audience, wrong_app,
    /// unknown_kid, algorithm, claim, keys_unavailable, forbidden, rate_limited).
    AUTH_REFUSALS_TOTAL: Counter(Count) = "room_auth_refusals_total";
    /// Database queries of the events API (the history's blocks and the rooms' versions it
    /// reads, cached and coalesced on each node), by `kind` (block|version): what the readers
    /// of every room together cost the database.
    HISTORY_QUERIES_TOTAL: Counter(Count) = "room_history_queries_total";
    /// Events API reads refused because their client (the user, or the address of an
    /// anonymous one) read more than `rooms.history.reads_per_sec_per_client`.
    HISTORY_READS_LIMITED_TOTAL: Counter(Count) = "room_history_reads_limited_total";
    /// Mic seat actions refused because their user, in that room, acted more than
    /// `rooms.seat_actions_per_user_per_sec`.
    SEAT_ACTIONS_LIMITED_TOTAL: Counter(Count) = "room_seat_actions_limited_total";
    /// Members listing reads refused because their client (the user, or the address of an
    /// anonymous one) read more than `rooms.members.reads_per_sec_per_client`.
    MEMBERS_READS_LIMITED_TOTAL: Counter(Count) = "room_members_reads_limited_total";
    /// Room requests forwarded to the node owning the room, by `result` (ok|error).
    COMMANDS_FORWARDED_TOTAL: Counter(Count) = "room_commands_forwarded_total";
    /// Calls of the cluster hop's route refused because no node of this cluster sealed them
    /// (no seal, another secret, a changed body, or sealed over a minute away from this clock).
    HOPS_REFUSED_TOTAL: Counter(Count) = "room_cluster_hops_refused_total";
    /// Shards whose lease this node holds (all 1024 without a cluster).
    CLUSTER_SHARDS_OWNED: Gauge(Count) = "room_cluster_shards_owned";
    /// Age of the oldest committed event a consumer has not passed yet, by `consumer` (0: caught up).
    CONSUMER_LAG_SECONDS: Gauge(Seconds) = "room_consumer_lag_seconds";
    /// Outbox id up to which a consumer has passed every event, by `consumer`.
    CONSUMER_POSITION: Gauge(Count) = "room_consumer_position";

    /// HTTP requests served, by `method`, `route` and `status`.
    HTTP_REQUESTS_TOTAL: Counter(Count) = "http_requests_total";
    /// HTTP request duration, by `method`, `route` and `status`.
    HTTP_REQUEST_DURATION_SECONDS: Histogram(Seconds) = "http_request_duration_seconds";
    /// `/v1/*` requests refused with 503 overloaded because `http.max_in_flight` were in flight.
    HTTP_REQUESTS_SHED_TOTAL: Counter(Count) = "room_http_requests_shed_total";
    /// `room.v1.RoomService` calls answered RESOURCE_EXHAUSTED overloaded because
    /// `http.max_in_flight` calls were in flight on the gRPC listener.
    GRPC_CALLS_SHED_TOTAL: Counter(Count) = "room_grpc_calls_shed_total";
    /// `/v1/*` requests answered 503 request_timeout after `http.request_timeout`.
    HTTP_REQUEST_TIMEOUTS_TOTAL: Counter(Count) = "room_http_request_timeouts_total";
    /// Request handlers that panicked (answered 500; the process kept serving).
    HTTP_PANICS_TOTAL: Counter(Count) = "room_http_panics_total";
    /// Open HTTP connections, by `listener` (public, admin, grpc).
    HTTP_CONNECTIONS: Gauge(Count) = "room_http_connections";
    /// Connections refused because `http.max_connections` were open, by `listener`.
    HTTP_CONNECTIONS_REFUSED_TOTAL: Counter(Count) = "room_http_connections_refused_total";

    /// Always 1, labelled with the `version` and git `commit` of the build (`crate::build`).
    BUILD_INFO: Gauge(Count) = "room_service_build_info";
    /// Database pool connections by `state` (idle, in_use).
    DB_POOL_CONNECTIONS: Gauge(Count) = "room_db_pool_connections";
    /// Most connections the database pool opens (`database.max_connections`).
    DB_POOL_MAX_CONNECTIONS: Gauge(Count) = "room_db_pool_max_connections";
    /// Database connection acquisitions that waited the whole acquire timeout (5 s) and failed,
    /// every connection being in use.
    DB_POOL_ACQUIRE_TIMEOUTS_TOTAL: Counter(Count) = "room_db_pool_acquire_timeouts_total";

    // Traces (`telemetry.otlp.*`): exported at 0 whether or not traces are exported.
    /// Spans the OTLP collector accepted.
    TRACE_SPANS_EXPORTED_TOTAL: Counter(Count) = "room_trace_spans_exported_total";
    /// Sampled spans never exported, by `reason`: queue_full (telemetry.otlp.max_queue_spans
    /// spans were waiting for export), export_failed (in an export call that failed).
    TRACE_SPANS_DROPPED_TOTAL: Counter(Count) = "room_trace_spans_dropped_total";
    /// OTLP export calls that failed (the collector unreachable, refusing, or not answering
    /// within telemetry.otlp.timeout), after the exporter's own retries.
    TRACE_EXPORTS_FAILED_TOTAL: Counter(Count) = "room_trace_exports_failed_total";
    /// Callers' sampled traceparents not kept because telemetry.otlp.forced_per_sec were kept
    /// beyond the ratio already (the trace is continued, the ratio deciding).
    TRACE_FORCED_REFUSED_TOTAL: Counter(Count) = "room_trace_forced_refused_total";

    // The `process_*` rows are exported by `metrics-process` (Linux, sampled every 5 s) and carry
    // its help texts; its own `describe` is not used, so that every name is described here.
    /// Total user and system CPU time spent in seconds
    PROCESS_CPU_SECONDS_TOTAL: Counter(Seconds) = "process_cpu_seconds_total";
    /// Resident memory size in bytes
    PROCESS_RESIDENT_MEMORY_BYTES: Gauge(Bytes) = "process_resident_memory_bytes";
    /// Virtual memory size in bytes
    PROCESS_VIRTUAL_MEMORY_BYTES: Gauge(Bytes) = "process_virtual_memory_bytes";
    /// Maximum amount of virtual memory available in bytes (0: unlimited)
    PROCESS_VIRTUAL_MEMORY_MAX_BYTES: Gauge(Bytes) = "process_virtual_memory_max_bytes";
    /// Number of open file descriptors
    PROCESS_OPEN_FDS: Gauge(Count) = "process_open_fds";
    /// Maximum number of open file descriptors (0: unlimited)
    PROCESS_MAX_FDS: Gauge(Count) = "process_max_fds";
    /// Number of OS threads in the process
    PROCESS_THREADS: Gauge(Count) = "process_threads";
    /// Start time of the process since unix epoch in seconds
    PROCESS_START_TIME_SECONDS: Gauge(Seconds) = "process_start_time_seconds";
}

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

/// Every metric name above, in order, for tests that compare against dashboards and alert
/// rules.
pub const ALL: [&str; METRICS.len()] = super::describe::names(METRICS);

/// The histograms among [`ALL`], each with its buckets: [`LATENCY_BUCKETS`] for times,
/// [`COUNT_BUCKETS`] for counts.
pub fn histograms() -> impl Iterator<Item = (&'static str, &'static [f64])> {
    METRICS.iter().filter(|m| m.kind == Kind::Histogram).map(|m| {
        let buckets = if m.unit == metrics::Unit::Count { COUNT_BUCKETS } else { LATENCY_BUCKETS };
        (m.name, buckets)
    })
}

/// Label key: what a query read (`block` | `version`).
pub const LABEL_KIND: &str = "kind";
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
/// Label key: why a row was parked, why publishing is paused, or why spans were dropped
/// (bounded sets).
pub const LABEL_REASON: &str = "reason";
/// Label key: which HTTP listener (`public`, `admin`).
pub const LABEL_LISTENER: &str = "listener";
/// Label key: a pool connection's state (`idle` | `in_use`).
pub const LABEL_STATE: &str = "state";
/// Label key: the crate version of the build.
pub const LABEL_VERSION: &str = "version";
/// Label key: the git commit of the build (12 characters, or `unknown`).
pub const LABEL_COMMIT: &str = "commit";

/// Buckets of every count histogram (events per IM call: `im_batch.max_events` is 32 by
/// default).
pub const COUNT_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];

/// Histogram buckets in seconds, from 1 ms to 10 s (covers a 3 s publish timeout and slow
/// commands).
pub const LATENCY_BUCKETS: &[f64] =
    &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::describe::{
        TRACE_DROP_REASONS, UNLABELLED_COUNTERS, describe_all, init_unlabelled_counters,
    };
    use metrics::Unit;
    use metrics_util::debugging::DebuggingRecorder;

    #[test]
    fn names_follow_prometheus_conventions() {
        for name in ALL {
            assert!(name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'), "{name}");
        }
        for (name, buckets) in histograms() {
            let seconds = name.ends_with("_seconds");
            assert!(seconds || name.ends_with("_per_call"), "{name}");
            assert_eq!(buckets == LATENCY_BUCKETS, seconds, "{name} has the buckets of its unit");
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
        expected.extend(TRACE_DROP_REASONS.map(|_| (TRACE_SPANS_DROPPED_TOTAL.to_owned(), zero())));
        expected.extend(["block", "version"].map(|_| (HISTORY_QUERIES_TOTAL.to_owned(), zero())));
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
            // The help text is the row's doc comment, on one line and without rustdoc's marks.
            let help = help.unwrap_or_default();
            assert!(
                !help.is_empty() && !help.contains(['`', '\n']) && !help.contains("  "),
                "{name}: {help}"
            );
            let seconds = name.ends_with("_seconds") || name.ends_with("_seconds_total");
            assert_eq!(unit == Some(Unit::Seconds), seconds, "{name}");
            let bytes = name.ends_with("_bytes");
            assert_eq!(unit == Some(Unit::Bytes), bytes, "{name}");
        }
    }
}
