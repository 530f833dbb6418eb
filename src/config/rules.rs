//! The building blocks of validation: duration parsing that keeps the sign, the problem
//! collector, and the checks of single values (node id, log level, IM base URL).

use std::time::Duration;

use super::error::ConfigError;
use super::raw::RawDuration;

/// Shortest accepted `tencent_im.usersig_ttl`.
pub(crate) const MIN_USERSIG_TTL: Duration = Duration::from_secs(60);
/// Shortest accepted `outbox_worker.retention` (a shorter one is surely a typo: delivered rows
/// are the operator's record of what went out).
pub(crate) const MIN_RETENTION: Duration = Duration::from_secs(60);
/// Longest node id (it is part of the outbox `worker_id`, VARCHAR(128)).
const MAX_NODE_ID_LEN: usize = 64;

/// Longest duration any key accepts (timer and clock arithmetic stay far from overflow).
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

/// A duration as written, once parsed.
pub(crate) enum Parsed {
    /// Greater than zero.
    Positive(Duration),
    /// Zero or negative (`"0s"`, `"-1s"`, `0`, `-5`).
    NonPositive,
}

/// Parses a duration, keeping the sign that `humantime` cannot represent.
pub(crate) fn parse_duration(raw: &RawDuration) -> Result<Parsed, String> {
    let text = raw.as_str().trim();
    if text.is_empty() {
        return Err("empty; expected a duration such as \"1s\" or \"250ms\"".into());
    }
    if let Ok(number) = text.parse::<i64>() {
        return match number {
            ..=0 => Ok(Parsed::NonPositive),
            _ => Err(format!("{text:?} has no unit; write e.g. \"{number}s\" or \"{number}ms\"")),
        };
    }
    let (negative, magnitude) = match text.strip_prefix('-') {
        Some(rest) => (true, rest.trim_start()),
        None => (false, text),
    };
    match humantime::parse_duration(magnitude) {
        Ok(_) if negative => Ok(Parsed::NonPositive),
        Ok(d) if d.is_zero() => Ok(Parsed::NonPositive),
        Ok(d) if d > MAX_DURATION => Err(format!(
            "{} is longer than the {} any duration here may be",
            raw.as_str(),
            humantime::format_duration(MAX_DURATION)
        )),
        Ok(d) => Ok(Parsed::Positive(d)),
        Err(e) => Err(format!("{text:?} is not a duration such as \"1s\" or \"250ms\" ({e})")),
    }
}

/// Collects rule violations so that all of them are reported together.
#[derive(Default)]
pub(crate) struct Problems(pub Vec<ConfigError>);

impl Problems {
    pub fn add(&mut self, key: &str, reason: impl Into<String>) {
        self.0.push(ConfigError::invalid(key, reason));
    }

    /// A duration that must be positive; `fallback` stands in after an error.
    pub fn positive(&mut self, key: &str, raw: &RawDuration, fallback: Duration) -> Duration {
        match parse_duration(raw) {
            Ok(Parsed::Positive(d)) => d,
            Ok(Parsed::NonPositive) => {
                self.add(key, "must be greater than zero");
                fallback
            }
            Err(reason) => {
                self.add(key, reason);
                fallback
            }
        }
    }

    /// A duration where non-positive means `default`.
    pub fn or_default(&mut self, key: &str, raw: &RawDuration, default: Duration) -> Duration {
        match parse_duration(raw) {
            Ok(Parsed::Positive(d)) => d,
            Ok(Parsed::NonPositive) => default,
            Err(reason) => {
                self.add(key, reason);
                default
            }
        }
    }
}

/// True for `[A-Za-z0-9_.-]{1,64}`.
pub(crate) fn is_valid_node_id(id: &str) -> bool {
    (1..=MAX_NODE_ID_LEN).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Forces a hostname into the node id alphabet: other characters become `-`, the result is cut
/// to 64 characters, and an empty result becomes `room-service`.
pub(crate) fn sanitize_node_id(hostname: &str) -> String {
    let cleaned: String = hostname
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') { c } else { '-' })
        .take(MAX_NODE_ID_LEN)
        .collect();
    if cleaned.is_empty() { "room-service".into() } else { cleaned }
}

/// Checks a log level: a list of `EnvFilter` directives where a bare word must be a level name
/// (so a typo like `infoo` is not silently taken as a target name).
pub(crate) fn check_log_level(level: &str) -> Result<(), String> {
    const LEVELS: &[&str] = &["trace", "debug", "info", "warn", "error", "off"];
    if level.trim().is_empty() {
        return Err(
            "empty; expected a level such as \"info\" or directives such as \"info,sqlx=warn\"".into()
        );
    }
    for directive in level.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let bare = !directive.contains(['=', '[', ':']);
        if bare && !LEVELS.contains(&directive.to_ascii_lowercase().as_str()) {
            return Err(format!(
                "{directive:?} is not a level (trace, debug, info, warn, error, off); write \"{directive}=LEVEL\" for a target"
            ));
        }
    }
    tracing_subscriber::EnvFilter::try_new(level)
        .map(|_| ())
        .map_err(|e| format!("not a valid filter directive list ({e})"))
}

/// Checks an IM base URL: `http(s)://host[:port][/path]` without query or fragment.
pub(crate) fn check_base_url(url: &str) -> Result<String, String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("{url:?} is not a URL ({e})"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("{url:?} must start with http:// or https://"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("{url:?} has no host"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() || !parsed.username().is_empty() {
        return Err(format!("{url:?} must not carry credentials, a query or a fragment"));
    }
    Ok(url.trim_end_matches('/').to_owned())
}
