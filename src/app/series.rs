//! The series exported at 0 from startup, for the features the settings enable: every counter
//! (and histogram) whose labels come from a known, bounded set. A series that first appears
//! at its first event leaves its panel on "No data" and shows no `increase()` for that event,
//! so an alert cannot tell "none" from "not scraped". The unlabelled counters are registered
//! by [`telemetry::install_metrics`](crate::telemetry::install_metrics); the gauges are set by
//! their samplers at startup (backlog, pool, process, shards) or when their task starts
//! (the worker's pause, the consumers' position and lag).

use crate::config::Settings;
use crate::domain::EventType;
use crate::publish::Path;
use crate::room::Transport;

/// Registers the zero series of everything `settings` runs: the publish paths (the synchronous
/// push always; the worker and each consumer when enabled), the parked rows, the
/// commands of each transport (the presence worker's `internal` ones when it runs), the
/// public API's routes and the authentication refusals of every reason.
pub(super) fn register_zero_series(settings: &Settings) {
    let enabled = [
        (Path::Sync, true),
        (Path::Worker, settings.outbox_worker.enabled),
        (Path::Webhook, settings.consumers.webhook.is_some()),
        (Path::Audit, settings.consumers.audit.is_some()),
    ];
    let paths: Vec<Path> = enabled.into_iter().filter_map(|(path, on)| on.then_some(path)).collect();
    let event_types = EventType::ALL.map(EventType::as_str);
    crate::publish::metrics::register_zero(&paths, &event_types);
    // Rows are parked by the worker, and by the lanes when IM refuses an event alone for its
    // content.
    crate::outbox::register_zero_series();
    let transports: Vec<Transport> = Transport::ALL
        .into_iter()
        .filter(|t| *t != Transport::Internal || settings.presence.enabled)
        .collect();
    crate::room::register_zero_series(&transports);
    crate::http::metrics::register_zero(&crate::http::V1_ROUTES);
    crate::auth::init_refusal_counters();
}
