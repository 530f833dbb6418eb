//! Telemetry: JSON (or pretty) logs, the Prometheus recorder, and the names of every metric
//! the service exports (one place, so dashboards, alert rules and the code agree).

pub mod names;

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

use crate::config::{LogFormat, LogSettings};

/// Target of audit log lines (who changed which outbox rows): shown at `info` even when an
/// operator command keeps everything else at `warn`.
pub const AUDIT_TARGET: &str = "audit";

/// The log filter of operator commands (`outbox ...`, `migrate`): warnings, and audit lines.
pub const TOOL_LOG_LEVEL: &str = "warn,audit=info";

/// Installs the global tracing subscriber: `RUST_LOG` when set, else `log.level`; JSON lines
/// with span fields flattened, or pretty output for humans. A second call does nothing.
pub fn init_logging(settings: &LogSettings) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&settings.level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = match settings.format {
        LogFormat::Json => {
            builder.json().flatten_event(true).with_current_span(true).with_span_list(false).try_init()
        }
        LogFormat::Pretty => builder.try_init(),
    };
}

/// Installs the process-wide Prometheus recorder once (explicit buckets so every `_seconds`
/// histogram renders as a histogram), exports the unlabelled counters at 0, and returns its
/// handle. Later calls return the same handle. The caller runs [`PrometheusHandle::run_upkeep`] periodically.
pub fn install_metrics() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let mut builder = PrometheusBuilder::new();
            for name in names::HISTOGRAMS {
                builder = builder
                    .set_buckets_for_metric(Matcher::Full(name.to_owned()), names::LATENCY_BUCKETS)
                    .unwrap_or_else(|_| PrometheusBuilder::new());
            }
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_ok() {
                names::describe_all();
                names::init_unlabelled_counters();
            }
            handle
        })
        .clone()
}
