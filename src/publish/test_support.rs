//! Helpers shared by the publish layer tests.

use std::sync::Arc;

use metrics_util::debugging::{DebugValue, Snapshotter};

use super::{Message, Path, Priority};

/// The body every test message carries; tests assert it never shows up in logs.
pub(crate) const SECRET_BODY: &str = r#"{"payload":"body-must-not-be-logged"}"#;

/// A message of the given type, published on the given path.
pub(crate) fn message(event_type: &'static str, path: Path) -> Message {
    Message {
        event_id: "0190f5c2-7b1e-7cc0-8000-000000000001".to_owned(),
        event_type,
        group: "room-1".to_owned(),
        priority: Priority::Normal,
        body: Arc::from(SECRET_BODY),
        path,
    }
}

/// One metric as seen by a `DebuggingRecorder`: name, labels sorted by key, value.
pub(crate) type Recorded = (String, Vec<(String, String)>, DebugValue);

/// Everything the recorder behind `snapshotter` holds, labels sorted by key.
pub(crate) fn recorded(snapshotter: &Snapshotter) -> Vec<Recorded> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let (_, key) = key.into_parts();
            let mut labels: Vec<(String, String)> = key
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            labels.sort();
            (key.name().to_owned(), labels, value)
        })
        .collect()
}

/// The metrics named `name`, with their labels and values.
pub(crate) fn named<'a>(
    recorded: &'a [Recorded],
    name: &str,
) -> Vec<(&'a [(String, String)], &'a DebugValue)> {
    recorded
        .iter()
        .filter(|(n, _, _)| n == name)
        .map(|(_, labels, value)| (labels.as_slice(), value))
        .collect()
}

/// Labels from `(key, value)` pairs, sorted by key like [`recorded`] does.
pub(crate) fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut labels: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    labels.sort();
    labels
}
