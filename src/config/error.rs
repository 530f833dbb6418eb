//! Why a configuration was refused. Every variant names the key (`http.listen`,
//! `outbox_worker.retry_strategy`, ...) or the file at fault, and never carries the value of a
//! secret key.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;

/// Keys whose values are secrets: their values never appear in a message.
pub(crate) const SECRET_KEYS: &[&str] = &[
    "tencent_im.secret_key",
    "database.url",
    "http.admin_token",
    "redis.url",
    "consumers.webhook.secret",
    "auth.service_tokens",
    "auth.jwt.secret",
];

/// A configuration that cannot be used; the service refuses to start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The config file does not exist.
    #[error("config file `{}` not found (give the right path with --config PATH)", path.display())]
    FileNotFound {
        /// The path that was given.
        path: PathBuf,
    },
    /// The file (or an environment variable) could not be read or parsed as YAML.
    #[error("cannot read configuration{}: {message}", Origin(origin))]
    Unreadable {
        /// The file or variable at fault, if known.
        origin: Option<String>,
        /// What went wrong.
        message: String,
    },
    /// A key that the configuration does not have.
    #[error("unknown configuration key `{key}`{}", Origin(origin))]
    UnknownKey {
        /// Dotted key path, e.g. `http.listn`.
        key: String,
        /// The file or variable that set it.
        origin: Option<String>,
    },
    /// A key whose value is unusable.
    #[error("invalid value for `{key}`{}: {reason}", Origin(origin))]
    InvalidValue {
        /// Dotted key path, e.g. `outbox_worker.retry_strategy`.
        key: String,
        /// The file or variable that set it, if known.
        origin: Option<String>,
        /// Why it was refused (never the value of a secret).
        reason: String,
    },
    /// Several of the above, all reported at once.
    #[error("{}", Joined(.0))]
    Multiple(Vec<ConfigError>),
}

impl ConfigError {
    /// The keys this error is about (empty for file-level errors), in report order.
    pub fn keys(&self) -> Vec<&str> {
        match self {
            Self::UnknownKey { key, .. } | Self::InvalidValue { key, .. } => vec![key.as_str()],
            Self::Multiple(errors) => errors.iter().flat_map(Self::keys).collect(),
            Self::FileNotFound { .. } | Self::Unreadable { .. } => Vec::new(),
        }
    }

    /// An invalid value with no known origin.
    pub(crate) fn invalid(key: &str, reason: impl Into<String>) -> Self {
        Self::InvalidValue { key: key.to_owned(), origin: None, reason: reason.into() }
    }

    /// One error for a list: the error itself when alone, [`ConfigError::Multiple`] otherwise.
    pub(crate) fn from_list(mut errors: Vec<ConfigError>) -> Option<Self> {
        match errors.len() {
            0 => None,
            1 => errors.pop(),
            _ => Some(Self::Multiple(errors)),
        }
    }
}

/// Renders ` (in X)` for a known origin.
struct Origin<'a>(&'a Option<String>);

impl fmt::Display for Origin<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(origin) => write!(f, " (from {origin})"),
            None => Ok(()),
        }
    }
}

/// Renders a list of errors, one per line after a count.
struct Joined<'a>(&'a [ConfigError]);

impl fmt::Display for Joined<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} configuration errors:", self.0.len())?;
        for error in self.0 {
            write!(f, "\n  - {error}")?;
        }
        Ok(())
    }
}

/// Where each key came from: the environment variable that set it, else the file.
pub(crate) struct Origins {
    /// Dotted key → environment variable name.
    pub env: HashMap<String, String>,
    /// The file read, if any.
    pub file: Option<PathBuf>,
}

impl Origins {
    /// The variable that set `key` (or a parent/child of it), else the file.
    fn of(&self, key: &str) -> Option<String> {
        let env = self.env.iter().find(|(env_key, _)| {
            *env_key == key
                || key.starts_with(&format!("{env_key}."))
                || env_key.starts_with(&format!("{key}."))
        });
        match env {
            Some((_, var)) => Some(format!("environment variable {var}")),
            None => self.file.as_ref().map(|path| format!("file {}", path.display())),
        }
    }

    /// Adds the origin of the key to validation errors that lack one.
    pub(crate) fn annotate(&self, error: ConfigError) -> ConfigError {
        match error {
            ConfigError::InvalidValue { key, origin: None, reason } => {
                let origin = self.of(&key);
                ConfigError::InvalidValue { key, origin, reason }
            }
            ConfigError::Multiple(errors) => {
                ConfigError::Multiple(errors.into_iter().map(|e| self.annotate(e)).collect())
            }
            other => other,
        }
    }

    /// Maps figment's extraction errors to ours, naming keys and hiding secret values.
    pub(crate) fn map_figment(&self, error: figment::Error) -> ConfigError {
        let errors = error.into_iter().map(|e| self.map_one(e)).collect();
        ConfigError::from_list(errors)
            .unwrap_or_else(|| ConfigError::Unreadable { origin: None, message: "unknown error".into() })
    }

    fn map_one(&self, error: figment::Error) -> ConfigError {
        use figment::error::Kind;
        let path = error.path.join(".");
        match error.kind {
            Kind::UnknownField(field, _) => {
                // figment's path already ends with the field; older versions stop at the parent.
                let key = match error.path.last() {
                    Some(last) if *last == field => path,
                    _ if path.is_empty() => field,
                    _ => format!("{path}.{field}"),
                };
                let origin = self.of(&key);
                ConfigError::UnknownKey { key, origin }
            }
            kind if path.is_empty() => ConfigError::Unreadable {
                origin: self.file.as_ref().map(|p| format!("file {}", p.display())),
                message: describe(&kind, true),
            },
            kind => {
                let holds_secret =
                    SECRET_KEYS.iter().any(|k| *k == path || k.starts_with(&format!("{path}.")));
                let reason = describe(&kind, holds_secret);
                let origin = self.of(&path);
                ConfigError::InvalidValue { key: path, origin, reason }
            }
        }
    }
}

/// figment's description of a bad value; with `hide`, without the value itself (it may be, or
/// contain, a secret).
fn describe(kind: &figment::error::Kind, hide: bool) -> String {
    use figment::error::Kind;
    match kind {
        Kind::InvalidType(_, expected) | Kind::InvalidValue(_, expected) if hide => {
            format!("expected {expected} (value hidden: it may hold a secret)")
        }
        Kind::InvalidLength(_, expected) if hide => format!("expected {expected}"),
        kind => kind.to_string(),
    }
}
