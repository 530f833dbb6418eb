//! Registers the unit and help text of every metric in [`super::names`] once at startup, and
//! creates the unlabelled counters at zero so they are scraped before their first event.

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};

use super::names::*;

/// Registers unit and help text of every metric with the installed recorder; call once at
/// startup, after installing the exporter.
pub fn describe_all() {
    describe_counter!(
        PUBLISH_SUCCESS_TOTAL,
        Unit::Count,
        "Events published successfully, by path, event type and result (delivered|skipped)"
    );
    describe_counter!(
        PUBLISH_FAILURE_TOTAL,
        Unit::Count,
        "Event publishes that failed, by path, event type and error class"
    );
    describe_histogram!(
        PUBLISH_LATENCY_SECONDS,
        Unit::Seconds,
        "Time of one publish through the stack, by path and event type"
    );
    describe_gauge!(
        OUTBOX_ROWS,
        Unit::Count,
        "Outbox rows by status (pending, delivering, retryable, failed)"
    );
    describe_gauge!(
        OUTBOX_OLDEST_PENDING_AGE_SECONDS,
        Unit::Seconds,
        "Age of the oldest outbox row not yet delivered"
    );
    describe_counter!(OUTBOX_CLAIMED_TOTAL, Unit::Count, "Outbox rows claimed by the worker");
    describe_counter!(
        OUTBOX_LEASE_LOST_TOTAL,
        Unit::Count,
        "Worker marks that changed nothing because the lease was lost"
    );
    describe_counter!(
        OUTBOX_PURGED_ROWS_TOTAL,
        Unit::Count,
        "Delivered outbox rows deleted by the retention purge"
    );
    describe_counter!(
        OUTBOX_PARKED_TOTAL,
        Unit::Count,
        "Outbox rows parked as failed (never retried until requeued), by event type and reason"
    );
    describe_gauge!(
        OUTBOX_PUBLISH_PAUSED,
        Unit::Count,
        "1 while the outbox worker has stopped publishing, by reason (configuration)"
    );
    describe_gauge!(
        IM_QUOTA_FALLBACK,
        Unit::Count,
        "1 while Redis is away and this node uses its own share of the app-wide IM quota"
    );
    describe_counter!(COMMANDS_TOTAL, Unit::Count, "Room commands handled, by command, result and transport");
    describe_counter!(
        COMMANDS_FORWARDED_TOTAL,
        Unit::Count,
        "Room requests forwarded to the node owning the room, by result (ok, error)"
    );
    describe_gauge!(CLUSTER_SHARDS_OWNED, Unit::Count, "Shards whose lease this node holds (of 1024)");
    describe_gauge!(
        CONSUMER_LAG_SECONDS,
        Unit::Seconds,
        "Age of the oldest committed event a consumer has not passed yet, by consumer (0: caught up)"
    );
    describe_gauge!(
        CONSUMER_POSITION,
        Unit::Count,
        "Outbox id up to which a consumer has passed every event, by consumer"
    );
    describe_histogram!(
        COMMAND_LATENCY_SECONDS,
        Unit::Seconds,
        "Time to handle one room command, by command"
    );
    describe_counter!(HTTP_REQUESTS_TOTAL, Unit::Count, "HTTP requests served, by method, route and status");
    describe_histogram!(
        HTTP_REQUEST_DURATION_SECONDS,
        Unit::Seconds,
        "HTTP request duration, by method, route and status"
    );
    describe_counter!(
        HTTP_REQUESTS_SHED_TOTAL,
        Unit::Count,
        "Requests refused with 503 overloaded because http.max_in_flight were in flight"
    );
    describe_counter!(
        HTTP_REQUEST_TIMEOUTS_TOTAL,
        Unit::Count,
        "Requests answered 503 request_timeout after http.request_timeout"
    );
    describe_counter!(HTTP_PANICS_TOTAL, Unit::Count, "Request handlers that panicked (answered 500)");
    describe_gauge!(HTTP_CONNECTIONS, Unit::Count, "Open HTTP connections, by listener");
    describe_counter!(
        HTTP_CONNECTIONS_REFUSED_TOTAL,
        Unit::Count,
        "Connections refused because http.max_connections were open, by listener"
    );
    describe_gauge!(
        BUILD_INFO,
        Unit::Count,
        "Always 1, labelled with the version and git commit of the build"
    );
    describe_gauge!(DB_POOL_CONNECTIONS, Unit::Count, "Database pool connections by state (idle, in_use)");
    describe_gauge!(DB_POOL_MAX_CONNECTIONS, Unit::Count, "Most connections the database pool opens");
    describe_counter!(
        DB_POOL_ACQUIRE_TIMEOUTS_TOTAL,
        Unit::Count,
        "Database connection acquisitions that timed out, every connection being in use"
    );
    describe_process();
}

/// The `process_*` help texts (those of `metrics-process`, whose own `describe` is not used so
/// that every name is described here).
fn describe_process() {
    describe_counter!(
        PROCESS_CPU_SECONDS_TOTAL,
        Unit::Seconds,
        "Total user and system CPU time spent in seconds"
    );
    describe_gauge!(PROCESS_RESIDENT_MEMORY_BYTES, Unit::Bytes, "Resident memory size in bytes");
    describe_gauge!(PROCESS_VIRTUAL_MEMORY_BYTES, Unit::Bytes, "Virtual memory size in bytes");
    describe_gauge!(
        PROCESS_VIRTUAL_MEMORY_MAX_BYTES,
        Unit::Bytes,
        "Maximum amount of virtual memory available in bytes (0: unlimited)"
    );
    describe_gauge!(PROCESS_OPEN_FDS, Unit::Count, "Number of open file descriptors");
    describe_gauge!(PROCESS_MAX_FDS, Unit::Count, "Maximum number of open file descriptors (0: unlimited)");
    describe_gauge!(PROCESS_THREADS, Unit::Count, "Number of OS threads in the process");
    describe_gauge!(
        PROCESS_START_TIME_SECONDS,
        Unit::Seconds,
        "Start time of the process since unix epoch in seconds"
    );
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
