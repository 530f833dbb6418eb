//! A string that must never reach a log line, an error message or a metric label.

use std::fmt;

/// A secret value (the Tencent secret key, a usersig). `Debug` and `Display` print a
/// placeholder; the value is read only through [`Secret::expose`].
#[derive(Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The raw value; call it only where the value is sent where it belongs.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// True when no value was given.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() { "Secret(<empty>)" } else { "Secret(<redacted>)" })
    }
}

/// Serializes as `"<redacted>"` (or `""` when empty): an effective configuration can be
/// printed without its secrets.
impl serde::Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(if self.0.is_empty() { "" } else { "<redacted>" })
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_never_show_the_value() {
        let s = Secret::new("hunter2");
        assert!(!format!("{s:?}").contains("hunter2"));
        assert!(!format!("{s}").contains("hunter2"));
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn serializing_redacts_the_value() {
        assert_eq!(serde_json::to_string(&Secret::new("hunter2")).unwrap(), r#""<redacted>""#);
        assert_eq!(serde_json::to_string(&Secret::default()).unwrap(), r#""""#);
    }
}
