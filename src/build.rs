//! What this binary was built from: the crate version and the git commit, for
//! `room_service_build_info{version,commit}` and `room-service --version`.
//!
//! The commit comes from the build script (`build.rs`, `vergen-gitcl`: `git rev-parse HEAD`);
//! where git cannot tell (a Docker build context without `.git`), from the environment
//! variable `ROOM_SERVICE_GIT_COMMIT` at build time; else it is `"unknown"`. It is cut to 12
//! characters.

use std::sync::OnceLock;

/// The crate version (`Cargo.toml`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit the binary was built from (12 hex characters), or `"unknown"`.
pub const COMMIT: &str = commit(option_env!("VERGEN_GIT_SHA"), option_env!("ROOM_SERVICE_GIT_COMMIT"));

/// Length of [`COMMIT`] when known.
pub const COMMIT_LEN: usize = 12;

/// `"0.1.0 (commit abc123def456)"`: the long `--version` text.
pub fn long_version() -> &'static str {
    static LONG: OnceLock<String> = OnceLock::new();
    LONG.get_or_init(|| format!("{VERSION} (commit {COMMIT})"))
}

/// The first non-empty of `from_git` and `from_env`, cut to [`COMMIT_LEN`]; `"unknown"` when
/// both are missing or blank.
const fn commit(from_git: Option<&'static str>, from_env: Option<&'static str>) -> &'static str {
    match (non_blank(from_git), non_blank(from_env)) {
        (Some(sha), _) | (None, Some(sha)) => shorten(sha),
        (None, None) => "unknown",
    }
}

const fn non_blank(value: Option<&'static str>) -> Option<&'static str> {
    match value {
        Some(v) if !v.trim_ascii().is_empty() => Some(v.trim_ascii()),
        _ => None,
    }
}

const fn shorten(sha: &'static str) -> &'static str {
    if sha.len() > COMMIT_LEN && sha.is_char_boundary(COMMIT_LEN) { sha.split_at(COMMIT_LEN).0 } else { sha }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commit_comes_from_git_then_the_environment_then_unknown() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(commit(Some(sha), Some("fedcba987654")), "0123456789ab");
        assert_eq!(commit(None, Some("fedcba987654")), "fedcba987654");
        assert_eq!(commit(Some(""), Some(" abc1234 ")), "abc1234");
        assert_eq!(commit(Some("  "), None), "unknown");
        assert_eq!(commit(None, None), "unknown");
    }

    #[test]
    fn the_built_commit_is_at_most_twelve_characters() {
        assert!(!COMMIT.is_empty() && COMMIT.len() <= COMMIT_LEN.max("unknown".len()), "{COMMIT}");
    }

    #[test]
    fn the_long_version_names_the_version_and_the_commit() {
        assert_eq!(long_version(), format!("{} (commit {COMMIT})", env!("CARGO_PKG_VERSION")));
    }
}
