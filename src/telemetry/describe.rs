//! Registers the unit and help text of every metric in [`super::names`] once at startup, and
//! creates the unlabelled counters at zero so they are scraped before their first event.

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};

use super::names::*;

/// What a metric is, which picks its `describe_*` macro.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// One exported metric with its unit and help text: one row of [`METRICS`], so that the name
/// list ([`ALL`]) and the descriptions cannot drift apart.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Metric {
    pub name: &'static str,
    pub kind: Kind,
    pub unit: Unit,
    pub help: &'static str,
}

/// A row of [`METRICS`] for a counter.
const fn counter(name: &'static str, unit: Unit, help: &'static str) -> Metric {
    Metric { name, kind: Kind::Counter, unit, help }
}

/// A row of [`METRICS`] for a gauge.
const fn gauge(name: &'static str, unit: Unit, help: &'static str) -> Metric {
    Metric { name, kind: Kind::Gauge, unit, help }
}

/// A row of [`METRICS`] for a histogram.
const fn histogram(name: &'static str, unit: Unit, help: &'static str) -> Metric {
    Metric { name, kind: Kind::Histogram, unit, help }
}

/// Every metric the service exports, with unit and help text. The `process_*` rows carry the
/// help texts of `metrics-process`, whose own `describe` is not used so that every name is
/// described here.
pub(crate) const METRICS: [Metric; 36] = [
    counter(
        PUBLISH_SUCCESS_TOTAL,
        Unit::Count,
        "Events published successfully, by path, event type and result (delivered|skipped)",
    ),
    counter(
        PUBLISH_FAILURE_TOTAL,
        Unit::Count,
        "Event publishes that failed, by path, event type and error class",
    ),
    histogram(
        PUBLISH_LATENCY_SECONDS,
        Unit::Seconds,
        "Time of one publish through the stack, by path and event type",
    ),
    gauge(OUTBOX_ROWS, Unit::Count, "Outbox rows by status (pending, delivering, retryable, failed)"),
    gauge(OUTBOX_OLDEST_PENDING_AGE_SECONDS, Unit::Seconds, "Age of the oldest outbox row not yet delivered"),
    counter(OUTBOX_CLAIMED_TOTAL, Unit::Count, "Outbox rows claimed by the worker"),
    counter(
        OUTBOX_LEASE_LOST_TOTAL,
        Unit::Count,
        "Worker marks that changed nothing because the lease was lost",
    ),
    counter(OUTBOX_PURGED_ROWS_TOTAL, Unit::Count, "Delivered outbox rows deleted by the retention purge"),
    counter(
        OUTBOX_PARKED_TOTAL,
        Unit::Count,
        "Outbox rows parked as failed (never retried until requeued), by event type and reason",
    ),
    gauge(
        OUTBOX_PUBLISH_PAUSED,
        Unit::Count,
        "1 while the outbox worker has stopped publishing, by reason (configuration)",
    ),
    gauge(
        IM_QUOTA_FALLBACK,
        Unit::Count,
        "1 while Redis is away and this node uses its own share of the app-wide IM quota",
    ),
    counter(COMMANDS_TOTAL, Unit::Count, "Room commands handled, by command, result and transport"),
    counter(
        COMMANDS_FORWARDED_TOTAL,
        Unit::Count,
        "Room requests forwarded to the node owning the room, by result (ok, error)",
    ),
    gauge(CLUSTER_SHARDS_OWNED, Unit::Count, "Shards whose lease this node holds (of 1024)"),
    gauge(
        CONSUMER_LAG_SECONDS,
        Unit::Seconds,
        "Age of the oldest committed event a consumer has not passed yet, by consumer (0: caught up)",
    ),
    gauge(
        CONSUMER_POSITION,
        Unit::Count,
        "Outbox id up to which a consumer has passed every event, by consumer",
    ),
    histogram(COMMAND_LATENCY_SECONDS, Unit::Seconds, "Time to handle one room command, by command"),
    counter(HTTP_REQUESTS_TOTAL, Unit::Count, "HTTP requests served, by method, route and status"),
    histogram(
        HTTP_REQUEST_DURATION_SECONDS,
        Unit::Seconds,
        "HTTP request duration, by method, route and status",
    ),
    counter(
        HTTP_REQUESTS_SHED_TOTAL,
        Unit::Count,
        "Requests refused with 503 overloaded because http.max_in_flight were in flight",
    ),
    counter(
        HTTP_REQUEST_TIMEOUTS_TOTAL,
        Unit::Count,
        "Requests answered 503 request_timeout after http.request_timeout",
    ),
    counter(HTTP_PANICS_TOTAL, Unit::Count, "Request handlers that panicked (answered 500)"),
    gauge(HTTP_CONNECTIONS, Unit::Count, "Open HTTP connections, by listener"),
    counter(
        HTTP_CONNECTIONS_REFUSED_TOTAL,
        Unit::Count,
        "Connections refused because http.max_connections were open, by listener",
    ),
    gauge(BUILD_INFO, Unit::Count, "Always 1, labelled with the version and git commit of the build"),
    gauge(DB_POOL_CONNECTIONS, Unit::Count, "Database pool connections by state (idle, in_use)"),
    gauge(DB_POOL_MAX_CONNECTIONS, Unit::Count, "Most connections the database pool opens"),
    counter(
        DB_POOL_ACQUIRE_TIMEOUTS_TOTAL,
        Unit::Count,
        "Database connection acquisitions that timed out, every connection being in use",
    ),
    counter(PROCESS_CPU_SECONDS_TOTAL, Unit::Seconds, "Total user and system CPU time spent in seconds"),
    gauge(PROCESS_RESIDENT_MEMORY_BYTES, Unit::Bytes, "Resident memory size in bytes"),
    gauge(PROCESS_VIRTUAL_MEMORY_BYTES, Unit::Bytes, "Virtual memory size in bytes"),
    gauge(
        PROCESS_VIRTUAL_MEMORY_MAX_BYTES,
        Unit::Bytes,
        "Maximum amount of virtual memory available in bytes (0: unlimited)",
    ),
    gauge(PROCESS_OPEN_FDS, Unit::Count, "Number of open file descriptors"),
    gauge(PROCESS_MAX_FDS, Unit::Count, "Maximum number of open file descriptors (0: unlimited)"),
    gauge(PROCESS_THREADS, Unit::Count, "Number of OS threads in the process"),
    gauge(PROCESS_START_TIME_SECONDS, Unit::Seconds, "Start time of the process since unix epoch in seconds"),
];

/// The names of `metrics`, in order: how [`ALL`] is built from [`METRICS`] at compile time.
pub(crate) const fn names<const N: usize>(metrics: &[Metric; N]) -> [&'static str; N] {
    let mut names = [""; N];
    let mut i = 0;
    while i < N {
        names[i] = metrics[i].name;
        i += 1;
    }
    names
}

/// Registers unit and help text of every metric with the installed recorder; call once at
/// startup, after installing the exporter.
pub fn describe_all() {
    for Metric { name, kind, unit, help } in METRICS {
        match kind {
            Kind::Counter => describe_counter!(name, unit, help),
            Kind::Gauge => describe_gauge!(name, unit, help),
            Kind::Histogram => describe_histogram!(name, unit, help),
        }
    }
}

/// The counters without labels: exported at 0 from startup by [`init_unlabelled_counters`].
pub const UNLABELLED_COUNTERS: [&str; 7] = [
    OUTBOX_CLAIMED_TOTAL,
    OUTBOX_LEASE_LOST_TOTAL,
    OUTBOX_PURGED_ROWS_TOTAL,
    DB_POOL_ACQUIRE_TIMEOUTS_TOTAL,
    HTTP_REQUESTS_SHED_TOTAL,
    HTTP_REQUEST_TIMEOUTS_TOTAL,
    HTTP_PANICS_TOTAL,
];

/// Exports every counter of [`UNLABELLED_COUNTERS`] at 0 right away: a counter that first
/// appears at 1 shows no `increase()` in Prometheus, so the first lost lease would never reach
/// the `RoomOutboxLeaseLost` alert. Call once at startup, after installing the exporter.
/// The forwarded-request counter starts at 0 for both results too (its first errors during a
/// shard move would not show otherwise).
pub fn init_unlabelled_counters() {
    for name in UNLABELLED_COUNTERS {
        metrics::counter!(name).increment(0);
    }
    for result in ["ok", "error"] {
        metrics::counter!(COMMANDS_FORWARDED_TOTAL, LABEL_RESULT => result).increment(0);
    }
}
