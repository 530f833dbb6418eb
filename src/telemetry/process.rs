//! Process metrics (`names::PROCESS`: CPU seconds, resident and virtual memory, open and
//! maximum file descriptors, threads, start time), read from `/proc` by `metrics-process`.

use std::sync::LazyLock;

use metrics_process::Collector;

/// The collector, with the standard `process_*` names (no prefix).
static COLLECTOR: LazyLock<Collector> = LazyLock::new(Collector::default);

/// Reads the process figures once and records them with the installed recorder. Cheap (a few
/// small `/proc` reads); a figure the OS does not give is left out.
pub fn collect_process_metrics() {
    COLLECTOR.collect();
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::collections::BTreeSet;

    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    use super::*;
    use crate::telemetry::names;

    #[test]
    fn the_collector_exports_exactly_the_declared_process_names() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::with_local_recorder(&recorder, collect_process_metrics);
        let snapshot = snapshotter.snapshot().into_vec();
        let exported: BTreeSet<_> = snapshot.iter().map(|(key, ..)| key.key().name().to_owned()).collect();
        let declared: BTreeSet<_> = names::PROCESS.iter().map(|n| n.to_string()).collect();
        assert_eq!(exported, declared);
        let value =
            |name: &str| snapshot.iter().find(|(key, ..)| key.key().name() == name).map(|(.., value)| value);
        let Some(&DebugValue::Gauge(rss)) = value(names::PROCESS_RESIDENT_MEMORY_BYTES) else {
            panic!("no RSS gauge")
        };
        assert!(rss.into_inner() > 0.0);
        assert!(matches!(value(names::PROCESS_CPU_SECONDS_TOTAL), Some(DebugValue::Counter(_))));
    }
}
