//! [`ImError`]: everything that can go wrong publishing one message to Tencent IM, and its
//! [`ErrorClass`] per SPEC §8. Messages are short and never carry the URL (it holds the
//! usersig), the secret key, or a raw IM response body.

use crate::publish::error::{Classify, ErrorClass};

/// Longest text kept from the IM answer (`ErrorInfo`, `MsgDropReason`) or a transport error.
const MAX_TEXT: usize = 160;

/// A failed publish to Tencent IM.
#[derive(Debug, thiserror::Error)]
pub enum ImError {
    /// The options cannot make a working client (bad base URL, TLS setup).
    #[error("tencent im client misconfigured: {0}")]
    InvalidOptions(String),
    /// Connecting, sending or reading failed; built from `reqwest::Error::without_url()`.
    #[error("tencent im transport error: {0}")]
    Transport(String),
    /// The transport itself timed out (connect timeout).
    #[error("tencent im transport timed out")]
    TransportTimeout,
    /// The answer was not HTTP 200.
    #[error("tencent im answered http {0}")]
    HttpStatus(u16),
    /// HTTP 200 but not a `send_group_msg` answer.
    #[error("tencent im answer undecodable: {0}")]
    Undecodable(&'static str),
    /// Tencent answered `ActionStatus: FAIL` (or a non-zero `ErrorCode`).
    #[error("tencent im error {code}: {info}")]
    Im {
        /// `ErrorCode`.
        code: i64,
        /// `ErrorInfo`, shortened; empty when absent.
        info: String,
    },
    /// Tencent accepted the call but dropped the message (AVChatRoom frequency control).
    #[error("tencent im dropped the message: {0}")]
    Dropped(String),
    /// The serialized request is over the size limit; nothing was sent.
    #[error("message too large: {size} bytes > {limit}")]
    TooLarge {
        /// Serialized size in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// Prefix + room id is longer than Tencent accepts for a custom `GroupId`; nothing was sent.
    #[error("group id too long: {len} bytes > {limit} (shorten tencent_im.group_id_prefix or the room id)")]
    GroupIdTooLong {
        /// Length of prefix + room id in bytes.
        len: usize,
        /// The limit in bytes.
        limit: usize,
    },
}

impl ImError {
    /// A transport error with its URL stripped and its source chain kept as short text.
    pub fn from_reqwest(err: reqwest::Error) -> Self {
        if err.is_timeout() {
            return ImError::TransportTimeout;
        }
        ImError::Transport(shorten(&crate::error_text::reqwest_chain(err)))
    }

    /// An IM error code with its (shortened) `ErrorInfo`.
    pub fn im(code: i64, info: &str) -> Self {
        ImError::Im { code, info: shorten(info) }
    }

    /// The IM `ErrorCode`, when Tencent answered one.
    pub fn im_code(&self) -> Option<i64> {
        match self {
            ImError::Im { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// Keeps at most [`MAX_TEXT`] characters, on a char boundary.
pub(crate) fn shorten(text: &str) -> String {
    match text.char_indices().nth(MAX_TEXT) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

impl Classify for ImError {
    fn class(&self) -> ErrorClass {
        match self {
            ImError::InvalidOptions(_) => ErrorClass::Configuration,
            ImError::Transport(_) | ImError::Undecodable(_) => ErrorClass::Transient,
            ImError::TransportTimeout => ErrorClass::Timeout,
            ImError::HttpStatus(status) => class_of_status(*status),
            ImError::Im { code, .. } => class_of_code(*code),
            ImError::Dropped(_) => ErrorClass::RateLimited,
            ImError::TooLarge { .. } => ErrorClass::Permanent,
            // No configuration change makes this room's GroupId fit: permanent for its events.
            ImError::GroupIdTooLong { .. } => ErrorClass::Permanent,
        }
    }

    fn reason(&self) -> &'static str {
        match self {
            ImError::GroupIdTooLong { .. } => "group_id_too_long",
            ImError::TooLarge { .. } => "message_too_large",
            other => other.class().as_str(),
        }
    }

    fn content_refused(&self) -> bool {
        matches!(
            self,
            ImError::TooLarge { .. }
                | ImError::Im { code: 80001 | 80002 | 90001 | 90002 | 90007 | 90010 | 93000, .. }
        )
    }

    fn app_wide(&self) -> bool {
        // Tencent's app-level frequency limits (60007 and kin, 10006) pause every group;
        // MsgDropReason and 10023 are one group's message rate.
        matches!(self, ImError::Im { code: 10006 | 60007 | 60011 | 60018 | 60019, .. })
    }
}

/// Class of a non-200 HTTP status: 5xx and 408 transient, 429 rate-limited, 3xx (redirects are
/// not followed) and other 4xx configuration, anything else transient.
pub fn class_of_status(status: u16) -> ErrorClass {
    match status {
        429 => ErrorClass::RateLimited,
        408 | 500..=599 => ErrorClass::Transient,
        300..=499 => ErrorClass::Configuration,
        _ => ErrorClass::Transient,
    }
}

/// Class of a Tencent IM `ErrorCode` (SPEC §8); unknown codes are transient.
pub fn class_of_code(code: i64) -> ErrorClass {
    match code {
        10006 | 10023 | 60007 | 60011 | 60018 | 60019 => ErrorClass::RateLimited,
        70001 | 70052 => ErrorClass::AuthRefresh,
        60002..=60006
        | 60009
        | 60010
        | 60012
        | 60015..=60017
        | 60020
        | 60021
        | 70002
        | 70003
        | 70005
        | 70009
        | 70013
        | 70014
        | 70016
        | 70020
        | 70050
        | 70051 => ErrorClass::Configuration,
        // 10007 a paid feature not enabled, 10026 an API disabled for the app, 10036 the app's
        // AVChatRoom quota, 10037 the per-user group limit: no retry helps; parked with the code.
        10003 | 10004 | 10007 | 10008 | 10010 | 10011 | 10015 | 10016 | 10017 | 10019 | 10026 | 10036
        | 10037 | 80001 | 80002 | 93000 | 90001 | 90002 | 90007 | 90010 => ErrorClass::Permanent,
        // Listed transient codes (10002, 60008, 60014, 70169, 70500, 20004, 20005, 90992,
        // 90994, 90995, 91000) and every unknown code.
        _ => ErrorClass::Transient,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::publish::classify;

    #[test]
    fn every_listed_code_has_its_class() {
        use ErrorClass::*;
        let table: &[(ErrorClass, &[i64])] = &[
            (Transient, &[10002, 60008, 60014, 70169, 70500, 20004, 20005, 90992, 90994, 90995, 91000]),
            (RateLimited, &[10006, 10023, 60007, 60011, 60018, 60019]),
            (AuthRefresh, &[70001, 70052]),
            (
                Configuration,
                &[
                    60002, 60003, 60004, 60005, 60006, 60009, 60010, 60012, 60015, 60016, 60017, 60020,
                    60021, 70002, 70003, 70005, 70009, 70013, 70014, 70016, 70020, 70050, 70051,
                ],
            ),
            (
                Permanent,
                &[
                    10003, 10004, 10007, 10008, 10010, 10011, 10015, 10016, 10017, 10019, 10026, 10036,
                    10037, 80001, 80002, 93000, 90001, 90002, 90007, 90010,
                ],
            ),
        ];
        for (class, codes) in table {
            for code in *codes {
                assert_eq!(class_of_code(*code), *class, "code {code}");
                assert_eq!(ImError::im(*code, "x").class(), *class, "code {code}");
            }
        }
    }

    #[test]
    fn unknown_codes_are_transient() {
        for code in [-1, 1, 60001, 60013, 70000, 99999, i64::MAX] {
            assert_eq!(class_of_code(code), ErrorClass::Transient, "code {code}");
        }
    }

    #[test]
    fn http_statuses_are_classified() {
        for (status, class) in [
            (500, ErrorClass::Transient),
            (502, ErrorClass::Transient),
            (503, ErrorClass::Transient),
            (408, ErrorClass::Transient),
            (429, ErrorClass::RateLimited),
            (400, ErrorClass::Configuration),
            (404, ErrorClass::Configuration),
            (403, ErrorClass::Configuration),
            (302, ErrorClass::Configuration),
        ] {
            assert_eq!(ImError::HttpStatus(status).class(), class, "status {status}");
        }
    }

    #[test]
    fn other_variants_are_classified() {
        assert_eq!(ImError::Transport("x".into()).class(), ErrorClass::Transient);
        assert_eq!(ImError::TransportTimeout.class(), ErrorClass::Timeout);
        assert_eq!(ImError::Undecodable("x").class(), ErrorClass::Transient);
        assert_eq!(ImError::Dropped("x".into()).class(), ErrorClass::RateLimited);
        let too_large = ImError::TooLarge { size: 9000, limit: 8000 };
        assert_eq!(too_large.class(), ErrorClass::Permanent);
    }

    #[test]
    fn classify_finds_an_im_error_in_a_box() {
        let err: crate::publish::BoxError = Box::new(ImError::im(70001, "expired"));
        assert_eq!(classify(err.as_ref()), ErrorClass::AuthRefresh);
    }

    #[test]
    fn a_quota_refusal_names_its_code_and_tencents_reason() {
        let err = ImError::im(10036, "create_group: AVChatRoom count exceeds the app's quota");
        assert_eq!(err.class(), ErrorClass::Permanent);
        let text = err.to_string();
        assert!(text.contains("10036") && text.contains("quota"), "{text}");
    }

    #[test]
    fn long_info_is_shortened() {
        let err = ImError::im(1, &"é".repeat(1000));
        assert!(err.to_string().chars().count() < 200);
    }
}
