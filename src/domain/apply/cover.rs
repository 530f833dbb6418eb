//! A room's `cover_url` (docs/API.md, `/info`): clients render it, so it must be what it looks
//! like — an absolute `https` URL with a host, no credentials, already in the canonical form
//! the URL parser browsers use (WHATWG) writes it out in. A URL the parser would rewrite
//! (`https:///etc/passwd` becomes `https://etc/passwd`, `<` becomes `%3C`, a capital host
//! lower case) is refused rather than stored as something other than what was sent.

use url::Url;

use super::moderation::{MAX_COVER_URL_BYTES, check_text};
use crate::domain::error::DomainError;

/// What a refused cover URL's 400 says.
const RULE: &str = "must be an absolute https URL with a host, without credentials or quotes, as a \
                    URL parser writes it (percent-encoded, as https://cdn.example.com/a%20b.png)";

/// Refuses `url` unless it is a cover URL a client may render as it is (`""`, removing the
/// cover, is the caller's to allow).
pub(super) fn check_cover_url(url: &str) -> Result<(), DomainError> {
    check_text("cover_url", url, MAX_COVER_URL_BYTES, false)?;
    let refused = || DomainError::InvalidArgument { field: "cover_url", reason: RULE.into() };
    let parsed = Url::parse(url).map_err(|_| refused())?;
    let host = parsed.host_str().unwrap_or_default();
    let credentials = !parsed.username().is_empty() || parsed.password().is_some();
    if parsed.scheme() != "https" || host.is_empty() || credentials || url.contains('\'') {
        return Err(refused());
    }
    if !canonical(url, &parsed) {
        return Err(refused());
    }
    Ok(())
}

/// Whether `url` is as `parsed` writes it out; a bare origin may leave out its path's `/`.
fn canonical(url: &str, parsed: &Url) -> bool {
    let written = parsed.as_str();
    written == url || (parsed.path() == "/" && written.strip_suffix('/') == Some(url))
}

#[cfg(test)]
mod tests {
    use super::check_cover_url;

    #[test]
    fn a_cover_url_is_an_absolute_https_url_with_a_host_in_canonical_form() {
        for good in [
            "https://cdn.example.com/r1.jpg",
            "https://cdn.example.com",
            "https://cdn.example.com/",
            "https://cdn.example.com:8443/a%20b.png?w=100&h=50#top",
            "https://10.0.0.1/c.png",
            "https://[::1]/c.png",
            "https://a/b",
        ] {
            assert_eq!(check_cover_url(good), Ok(()), "{good}");
        }
        for bad in [
            "https:///etc/passwd",
            "https://a/<script>",
            "https://a/\"x\"",
            "https://a/it's",
            "https://a/a b.png",
            "https://a\\b",
            "https://CDN.example.com/c.png",
            "https://user:pw@cdn.example.com/c.png",
            "https://cdn.example.com@evil.test/c.png",
            "https://bücher.example/c.png",
            "https://cdn.example.com/é.png",
            "http://cdn.example.com/c.png",
            "javascript:alert(1)",
            "file:///etc/passwd",
            "https://",
            "https:",
            "cdn.example.com/c.png",
            "//cdn.example.com/c.png",
            "https://cdn.example.com/c.png\u{0}",
            "https://cdn.example.com/./c.png",
        ] {
            let refused = check_cover_url(bad).expect_err(bad);
            assert!(
                matches!(refused, crate::domain::DomainError::InvalidArgument { field: "cover_url", .. }),
                "{bad}: {refused:?}"
            );
        }
        let long = format!("https://cdn.example.com/{}", "c".repeat(489));
        assert_eq!(long.len(), 513);
        assert!(check_cover_url(&long).is_err());
        assert_eq!(check_cover_url(&long[..512]), Ok(()));
    }
}
