//! Helpers shared by the publish layer tests.

use std::sync::Arc;

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
