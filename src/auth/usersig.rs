//! `auth.mode: usersig`: the caller's own Tencent IM UserSig as its bearer token, verified
//! exactly like Tencent does (SPEC §8; the very code the IM leaf signs with, in reverse:
//! [`crate::publish::tencent::usersig::verify_own`]). `TLS.identifier` is the user.

use super::{Reason, TokenUser};
use crate::config::UserSigSettings;
use crate::domain::UserId;
use crate::publish::tencent::usersig::{self, UserSigError};
use crate::secret::Secret;

/// Verifies UserSigs of one IM application.
#[derive(Debug)]
pub struct UserSigVerifier {
    sdk_app_id: u64,
    secret_key: Secret,
}

impl UserSigVerifier {
    /// A verifier for the application `settings` name.
    pub fn new(settings: &UserSigSettings) -> Self {
        Self { sdk_app_id: settings.sdk_app_id, secret_key: settings.secret_key.clone() }
    }

    /// The user `token` is a valid UserSig of at `now_secs`, and when the UserSig expires.
    pub fn verify_at(&self, token: &str, now_secs: u64) -> Result<TokenUser, Reason> {
        let info =
            usersig::verify_own(token, self.secret_key.expose(), self.sdk_app_id, now_secs).map_err(|e| {
                match e {
                    UserSigError::Undecodable => Reason::Malformed,
                    UserSigError::BadSignature | UserSigError::IdentifierMismatch => Reason::BadSignature,
                    UserSigError::AppIdMismatch => Reason::WrongApp,
                    UserSigError::Expired => Reason::Expired,
                }
            })?;
        let expires_at = Some(info.time.saturating_add(info.expire));
        let user = UserId::parse(info.identifier).map_err(|_| Reason::Claim)?;
        Ok(TokenUser { user, expires_at })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "5bd2850fff3ecb11d7c805251c51ee463a25727bddc2385f3fa8bfee1bb93b5e";
    const APP: u64 = 1_400_000_000;
    const NOW: u64 = 1_800_000_000;

    fn verifier() -> UserSigVerifier {
        UserSigVerifier::new(&UserSigSettings { sdk_app_id: APP, secret_key: Secret::new(KEY) })
    }

    #[test]
    fn a_valid_usersig_names_its_user_and_every_bad_one_has_its_reason() {
        let v = verifier();
        let own = usersig::generate(KEY, APP, "alice", 3600, NOW);
        let alice = TokenUser { user: UserId::parse("alice").unwrap(), expires_at: Some(NOW + 3600) };
        assert_eq!(v.verify_at(&own, NOW + 10), Ok(alice));
        assert_eq!(
            v.verify_at(&usersig::generate("another-key", APP, "alice", 3600, NOW), NOW),
            Err(Reason::BadSignature)
        );
        assert_eq!(
            v.verify_at(&usersig::generate(KEY, APP + 1, "alice", 3600, NOW), NOW),
            Err(Reason::WrongApp)
        );
        assert_eq!(v.verify_at(&own, NOW + 3601), Err(Reason::Expired));
        assert_eq!(v.verify_at("garbage", NOW), Err(Reason::Malformed));
        // Tencent accepts any identifier; a user id of this API is narrower.
        assert_eq!(v.verify_at(&usersig::generate(KEY, APP, "a b", 3600, NOW), NOW), Err(Reason::Claim));
    }
}
