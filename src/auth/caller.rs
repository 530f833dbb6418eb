//! Who sent a request ([`Caller`]: anonymous, a user, a service) and what the command log keeps
//! of it; the user a verified token names ([`TokenUser`]).

use crate::domain::UserId;

/// The user a token names once it verified, and when the token expires (Unix seconds;
/// `None` when its expiry cannot be read as such).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenUser {
    /// The user.
    pub user: UserId,
    /// The token's own expiry (`exp`; a UserSig's time + expire).
    pub expires_at: Option<u64>,
}

/// Who sent a request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Caller {
    /// `auth.mode: none`: nobody in particular; acts as whoever the request names.
    Anonymous,
    /// A user, by a verified JWT or UserSig.
    User(UserId),
    /// A backend holding a service token (`auth.service_tokens`), by its name.
    Service(String),
}

impl Caller {
    /// What the command log keeps of the caller (part of a command's identity): `user:<id>`,
    /// `service:<name>`, or nothing for an anonymous caller (whose commands stay as they were
    /// logged before authentication existed).
    pub fn identity(&self) -> Option<String> {
        match self {
            Caller::Anonymous => None,
            Caller::User(user) => Some(format!("user:{user}")),
            Caller::Service(name) => Some(format!("service:{name}")),
        }
    }

    /// True when the caller may act as `user`: itself, or anyone for a service or an anonymous
    /// caller (mode none).
    pub fn may_act_as(&self, user: &UserId) -> bool {
        match self {
            Caller::User(me) => me == user,
            Caller::Anonymous | Caller::Service(_) => true,
        }
    }
}
