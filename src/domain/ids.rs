//! Validated identifiers: `room_id`, `user_id`, `gift_id` (1–64 chars of `[A-Za-z0-9_.-]`) and
//! `command_id` (1–128 printable ASCII chars).

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

fn check(value: &str, max: usize, ok: fn(u8) -> bool, allowed: &'static str) -> Result<(), IdError> {
    if value.is_empty() {
        return Err(IdError::Empty);
    }
    if value.len() > max {
        return Err(IdError::TooLong { max });
    }
    if !value.bytes().all(ok) {
        return Err(IdError::BadChar { allowed });
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
    fn serde_validates() {
        assert!(serde_json::from_str::<RoomId>("\"ok\"").is_ok());
        assert!(serde_json::from_str::<RoomId>("\"not ok\"").is_err());
    }
}
