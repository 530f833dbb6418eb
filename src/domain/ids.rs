//! Validated identifiers: `room_id`, `user_id`, `gift_id` (1–64 chars of `[A-Za-z0-9_.-]`),
//! `command_id` and `request_id` (1–128 printable ASCII chars). These limits are the one table
//! the edges (HTTP and gRPC), the storage columns (`VARCHAR(64)`, `VARCHAR(128)`) and the
//! largest event ([`crate::domain::LARGEST_IM_EVENT_BYTES`]) are derived from.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why a string is not a valid identifier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// Empty string.
    #[error("must not be empty")]
    Empty,
    /// Longer than allowed.
    #[error("must be at most {max} characters")]
    TooLong {
        /// The limit.
        max: usize,
    },
    /// A character outside the allowed set.
    #[error("{allowed}")]
    BadChar {
        /// Description of the allowed set.
        allowed: &'static str,
    },
}

/// Checks `value` against one id rule. The alphabet is checked before the length: both
/// alphabets are ASCII, so a string that passes it has as many bytes as characters and
/// "at most `max` characters" is true of it (a 30-character non-ASCII string is a bad
/// character, not "too long" because it has 90 bytes).
fn check(value: &str, max: usize, ok: fn(u8) -> bool, allowed: &'static str) -> Result<(), IdError> {
    if value.is_empty() {
        return Err(IdError::Empty);
    }
    if !value.bytes().all(ok) {
        return Err(IdError::BadChar { allowed });
    }
    if value.len() > max {
        return Err(IdError::TooLong { max });
    }
    Ok(())
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

fn is_printable_ascii(b: u8) -> bool {
    (0x20..=0x7e).contains(&b)
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $max:expr, $ok:expr, $allowed:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Validates and wraps a string.
            pub fn parse(value: impl Into<String>) -> Result<Self, IdError> {
                let value = value.into();
                check(&value, $max, $ok, $allowed)?;
                Ok(Self(value))
            }

            /// The identifier as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(value: String) -> Result<Self, IdError> {
                Self::parse(value)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

const NAME_CHARS: &str = "may contain only A-Z, a-z, 0-9, '_', '.', '-'";

id_type!(
    /// A room identifier.
    RoomId, 64, is_name_byte, NAME_CHARS
);
id_type!(
    /// A user identifier.
    UserId, 64, is_name_byte, NAME_CHARS
);
id_type!(
    /// A gift identifier.
    GiftId, 64, is_name_byte, NAME_CHARS
);
id_type!(
    /// A client-chosen command identifier, the idempotency key of commands.
    CommandId, 128, is_printable_ascii, "may contain only printable ASCII characters"
);

id_type!(
    /// A request's tracing id (`x-request-id`), stored in the command log (every event of the
    /// command carries its digest, [`crate::domain::envelope_id`]): 1–128 printable ASCII
    /// characters, the same rule on every transport.
    RequestId, 128, is_printable_ascii, "may contain only printable ASCII characters"
);

/// Command ids the service issues itself (the presence worker's removals) start with this;
/// clients may not use it, so no client command can take the id of one the service will issue.
pub const RESERVED_COMMAND_PREFIX: &str = "presence:";

impl CommandId {
    /// The id of a command the service issues itself: the reserved prefix, then `suffix`.
    pub fn reserved(suffix: &str) -> Result<Self, IdError> {
        Self::parse(format!("{RESERVED_COMMAND_PREFIX}{suffix}"))
    }

    /// True when the id carries the reserved prefix: clients may not send it.
    pub fn is_reserved(&self) -> bool {
        self.0.starts_with(RESERVED_COMMAND_PREFIX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_accept_the_documented_alphabet() {
        assert!(RoomId::parse("Room_1.a-b").is_ok());
        assert!(UserId::parse("x".repeat(64)).is_ok());
    }

    #[test]
    fn names_reject_empty_long_and_bad_chars() {
        assert_eq!(RoomId::parse(""), Err(IdError::Empty));
        assert_eq!(UserId::parse("x".repeat(65)), Err(IdError::TooLong { max: 64 }));
        assert!(matches!(GiftId::parse("a b"), Err(IdError::BadChar { .. })));
        assert!(matches!(RoomId::parse("房间"), Err(IdError::BadChar { .. })));
    }

    #[test]
    fn command_ids_are_printable_ascii_up_to_128() {
        assert!(CommandId::parse("cmd: 1/2 {x}").is_ok());
        assert!(CommandId::parse("c".repeat(128)).is_ok());
        assert!(CommandId::parse("c".repeat(129)).is_err());
        assert!(CommandId::parse("tab\there").is_err());
    }

    #[test]
    fn reserved_command_ids_carry_the_prefix() {
        let id = CommandId::reserved("stale:00").unwrap();
        assert_eq!(id.as_str(), format!("{RESERVED_COMMAND_PREFIX}stale:00"));
        assert!(id.is_reserved());
        assert!(!CommandId::parse("stale:00").unwrap().is_reserved());
    }

    #[test]
    fn serde_validates() {
        assert!(serde_json::from_str::<RoomId>("\"ok\"").is_ok());
        assert!(serde_json::from_str::<RoomId>("\"not ok\"").is_err());
    }

    #[test]
    fn a_long_string_of_bad_chars_is_a_bad_char_not_too_long() {
        // 30 characters, 90 bytes: "at most 64 characters" would be wrong.
        assert!(matches!(RoomId::parse("房".repeat(30)), Err(IdError::BadChar { .. })));
        assert!(matches!(CommandId::parse("é".repeat(100)), Err(IdError::BadChar { .. })));
    }
}

/// Property tests: every id type accepts exactly the documented rule, from `parse` and from
/// JSON alike, refuses every other JSON value, and round-trips what it accepts.
#[cfg(test)]
mod proptests {
    use proptest::prelude::*;
    use serde::Serialize;

    use crate::strategies::{any_json, any_string};
    use serde::de::DeserializeOwned;
    use serde_json::Value;

    use super::*;

    /// The rule of room, user and gift ids, from the documentation: 1–64 characters of
    /// `[A-Za-z0-9_.-]`.
    fn is_name(s: &str) -> bool {
        (1..=64).contains(&s.chars().count())
            && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    }

    /// The rule of command ids: 1–128 printable ASCII characters.
    fn is_command_id(s: &str) -> bool {
        (1..=128).contains(&s.chars().count()) && s.chars().all(|c| (' '..='~').contains(&c))
    }

    /// `parse`, `TryFrom`, `Deserialize` agree with `rule`; an accepted id round-trips through
    /// `Display`, `as_str`, `String` and JSON unchanged; a refusal names the broken rule.
    fn check<T>(
        s: &str,
        max: usize,
        rule: fn(&str) -> bool,
        parse: fn(String) -> Result<T, IdError>,
    ) -> Result<(), TestCaseError>
    where
        T: Serialize + DeserializeOwned + PartialEq + fmt::Debug + fmt::Display + Clone + Into<String>,
    {
        let parsed = parse(s.to_owned());
        let from_json = serde_json::from_value::<T>(Value::String(s.to_owned()));
        let from_text = serde_json::from_str::<T>(&serde_json::to_string(s).unwrap());
        prop_assert_eq!(parsed.is_ok(), rule(s), "parse({:?}) = {:?}", s, parsed);
        prop_assert_eq!(from_json.is_ok(), rule(s), "from_value({:?})", s);
        prop_assert_eq!(from_text.is_ok(), rule(s), "from_str({:?})", s);
        match parsed {
            Ok(id) => {
                prop_assert_eq!(id.to_string(), s);
                prop_assert_eq!(serde_json::to_value(&id).unwrap(), Value::String(s.to_owned()));
                let text = serde_json::to_string(&id).unwrap();
                prop_assert_eq!(&serde_json::from_str::<T>(&text).unwrap(), &id);
                prop_assert_eq!(&from_json.unwrap(), &id);
                prop_assert_eq!(id.into(), s.to_owned());
            }
            Err(IdError::Empty) => prop_assert!(s.is_empty()),
            Err(IdError::TooLong { max: m }) => {
                prop_assert_eq!(m, max);
                prop_assert!(s.chars().count() > max, "{} characters called too long", s.chars().count());
            }
            Err(IdError::BadChar { .. }) => prop_assert!(!s.is_empty()),
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// Room, user and gift ids accept exactly 1–64 characters of `[A-Za-z0-9_.-]`.
        #[test]
        fn names_accept_exactly_the_rule(s in any_string()) {
            check(&s, 64, is_name, RoomId::parse)?;
            check(&s, 64, is_name, UserId::parse)?;
            check(&s, 64, is_name, GiftId::parse)?;
        }

        /// Command ids accept exactly 1–128 printable ASCII characters.
        #[test]
        fn command_ids_accept_exactly_the_rule(s in any_string()) {
            check(&s, 128, is_command_id, CommandId::parse)?;
        }

        /// Only a JSON string can be an id: every other value is an error, never a panic.
        #[test]
        fn ids_decode_only_from_strings(value in any_json()) {
            let is_string = value.is_string();
            let text = value.to_string();
            for ok in [
                serde_json::from_value::<RoomId>(value.clone()).is_ok(),
                serde_json::from_str::<UserId>(&text).is_ok(),
                serde_json::from_value::<GiftId>(value.clone()).is_ok(),
                serde_json::from_str::<CommandId>(&text).is_ok(),
            ] {
                prop_assert!(!ok || is_string, "{} decoded as an id", text);
            }
        }
    }
}
