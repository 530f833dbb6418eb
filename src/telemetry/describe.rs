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

/// One exported metric with its kind, unit and help text: one row of [`METRICS`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Metric {
    pub name: &'static str,
    pub kind: Kind,
    pub unit: Unit,
    pub help: &'static str,
}

/// Declares the metric table of [`super::names`]: for each row `/// help` then
/// `NAME: Kind(Unit) = "metric_name";`, a `pub const NAME` documented by its help text, and
/// `METRICS` with every row in order, so that a name cannot be declared without its kind, unit
/// and help text.
macro_rules! declare_metrics {
    ($( $(#[doc = $help:literal])+ $name:ident: $kind:ident($unit:ident) = $metric:literal; )+) => {
        $(
            $(#[doc = $help])+
            pub const $name: &str = $metric;
        )+

        /// Every metric the service exports, with its kind, unit and help text.
        pub(crate) const METRICS: &[Metric] = &[$(
            Metric {
                name: $name,
                kind: Kind::$kind,
                unit: metrics::Unit::$unit,
                help: concat!($($help),+),
            }
        ),+];
    };
}
pub(crate) use declare_metrics;

/// The names of `metrics`, in order: how [`super::names::ALL`] is built from the table at
/// compile time.
pub(crate) const fn names<const N: usize>(metrics: &[Metric]) -> [&'static str; N] {
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
    for &Metric { name, kind, unit, help } in METRICS {
        // The help text is the row's doc comment: one line, without rustdoc's backticks.
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ").replace('`', "");
        match kind {
            Kind::Counter => describe_counter!(name, unit, help),
            Kind::Gauge => describe_gauge!(name, unit, help),
            Kind::Histogram => describe_histogram!(name, unit, help),
        }
    }
}

/// The counters without labels: exported at 0 from startup by [`init_unlabelled_counters`].
pub const UNLABELLED_COUNTERS: [&str; 13] = [
    OUTBOX_CLAIMED_TOTAL,
    OUTBOX_LEASE_LOST_TOTAL,
    OUTBOX_PURGED_ROWS_TOTAL,
    DB_POOL_ACQUIRE_TIMEOUTS_TOTAL,
    HTTP_REQUESTS_SHED_TOTAL,
    GRPC_CALLS_SHED_TOTAL,
    HTTP_REQUEST_TIMEOUTS_TOTAL,
    HTTP_PANICS_TOTAL,
    TRACE_SPANS_EXPORTED_TOTAL,
    TRACE_EXPORTS_FAILED_TOTAL,
    TRACE_FORCED_REFUSED_TOTAL,
    HISTORY_READS_LIMITED_TOTAL,
    HOPS_REFUSED_TOTAL,
];

/// The `reason`s of `room_trace_spans_dropped_total` (`telemetry::traces`'s queue).
pub const TRACE_DROP_REASONS: [&str; 2] = ["queue_full", "export_failed"];

/// Exports every counter of [`UNLABELLED_COUNTERS`] at 0 right away: a counter that first
/// appears at 1 shows no `increase()` in Prometheus, so the first lost lease would never reach
/// the `RoomOutboxLeaseLost` alert. Call once at startup, after installing the exporter.
/// The forwarded-request counter starts at 0 for both results too (its first errors during a
/// shard move would not show otherwise), the dropped spans for both reasons, and the events
/// API's queries of both kinds.
pub fn init_unlabelled_counters() {
    for name in UNLABELLED_COUNTERS {
        metrics::counter!(name).increment(0);
    }
    for result in ["ok", "error"] {
        metrics::counter!(COMMANDS_FORWARDED_TOTAL, LABEL_RESULT => result).increment(0);
    }
    for reason in TRACE_DROP_REASONS {
        metrics::counter!(TRACE_SPANS_DROPPED_TOTAL, LABEL_REASON => reason).increment(0);
    }
    for kind in ["block", "version"] {
        metrics::counter!(HISTORY_QUERIES_TOTAL, LABEL_KIND => kind).increment(0);
    }
}
