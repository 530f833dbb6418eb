//! Telemetry: JSON (or pretty) logs, the Prometheus recorder, the names of every metric the
//! service exports (one place, so dashboards, alert rules and the code agree), and the operator
//! signals sampled every few seconds (the process; the database pool's are `store::pool_metrics`) or
//! set once (build info).

mod describe;
pub mod names;
pub mod process;
pub mod traces;

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tracing::Level;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::build;
use crate::config::{LogFormat, LogSettings, OtlpSettings};

/// Target of audit log lines (who changed which outbox rows): shown at `info` even when an
/// operator command keeps everything else at `warn`.
pub const AUDIT_TARGET: &str = "audit";

/// The log filter of operator commands (`outbox ...`, `migrate`): warnings, and audit lines.
pub const TOOL_LOG_LEVEL: &str = "warn,audit=info";

/// Installs the global tracing subscriber: `RUST_LOG` when set, else `log.level`; JSON lines
/// with span fields flattened, or pretty output for humans. A second call does nothing.
pub fn init_logging(settings: &LogSettings) {
    install(settings, None);
}

/// The service's subscriber: [`init_logging`]'s logs and, when `otlp` is set, every span of
/// the service exported by OTLP ([`traces`]), whatever the log level. Must run inside the Tokio
/// runtime; keep the [`traces::Exporter`] and shut it down at stop.
pub fn init_logging_and_traces(
    log: &LogSettings,
    otlp: Option<&OtlpSettings>,
    node_id: &str,
) -> Result<Option<traces::Exporter>, String> {
    let Some(otlp) = otlp else {
        install(log, None);
        return Ok(None);
    };
    let (exporter, tracer) = traces::exporter(otlp, node_id)?;
    install(log, Some(tracer));
    Ok(Some(exporter))
}

fn install(settings: &LogSettings, tracer: Option<opentelemetry_sdk::trace::Tracer>) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&settings.level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = match settings.format {
        LogFormat::Json => {
            logs.json().flatten_event(true).with_current_span(true).with_span_list(false).boxed()
        }
        LogFormat::Pretty => logs.boxed(),
    };
    // The service's own spans only, at info whatever the log level: the exporter's (tonic,
    // hyper) would trace the export itself.
    let spans = tracer.map(|tracer| {
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_threads(false)
            .with_level(false)
            .with_target(false)
            .with_tracked_inactivity(false)
            .with_context_activation(false)
            .with_filter(Targets::new().with_target("room_service", Level::INFO))
    });
    let _ = tracing_subscriber::registry().with(logs.with_filter(filter)).with(spans).try_init();
}

/// Installs the process-wide Prometheus recorder once (explicit buckets so every `_seconds`
/// histogram renders as a histogram), exports the unlabelled counters at 0, the build info and
/// a first sample of the process metrics, and returns its handle. Later calls return the same
/// handle. The caller runs [`PrometheusHandle::run_upkeep`] and [`sample_process`]
/// periodically.
pub fn install_metrics() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let mut builder = PrometheusBuilder::new();
            for (name, buckets) in names::histograms() {
                builder = builder
                    .set_buckets_for_metric(Matcher::Full(name.to_owned()), buckets)
                    .unwrap_or_else(|_| PrometheusBuilder::new());
            }
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_ok() {
                describe::describe_all();
                describe::init_unlabelled_counters();
                record_build_info();
                process::collect_process_metrics();
            }
            handle
        })
        .clone()
}

/// Sets `room_service_build_info{version, commit}` to 1.
pub fn record_build_info() {
    metrics::gauge!(names::BUILD_INFO, names::LABEL_VERSION => build::VERSION, names::LABEL_COMMIT => build::COMMIT)
        .set(1.0);
}

/// Samples the process metrics, which have no event of their own. Cheap and synchronous; run
/// it every few seconds.
pub fn sample_process() {
    process::collect_process_metrics();
}
