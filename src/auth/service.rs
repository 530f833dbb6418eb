//! Service tokens (`auth.service_tokens`): backend callers that act for any user. A presented
//! token is compared with every configured one in constant time, on SHA-256 digests (so neither
//! the position of the first differing byte nor a token's length shows in the time taken).

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::ServiceToken;

/// The configured service tokens, by digest.
pub(super) struct ServiceTokens(Vec<(String, [u8; 32])>);

impl std::fmt::Debug for ServiceTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter().map(|(name, _)| name)).finish()
    }
}

impl ServiceTokens {
    pub(super) fn new(tokens: &[ServiceToken]) -> Self {
        Self(
            tokens
                .iter()
                .map(|t| (t.name.clone(), Sha256::digest(t.token.expose().as_bytes()).into()))
                .collect(),
        )
    }

    /// The name of the service whose token `token` is; every token is compared, whatever
    /// matches first.
    pub(super) fn find(&self, token: &[u8]) -> Option<&str> {
        if self.0.is_empty() {
            return None;
        }
        let digest: [u8; 32] = Sha256::digest(token).into();
        let mut found = None;
        for (name, expected) in &self.0 {
            if bool::from(digest.ct_eq(expected)) {
                found = Some(name.as_str());
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::Secret;

    #[test]
    fn only_an_exact_token_names_its_service() {
        let tokens = ServiceTokens::new(&[
            ServiceToken { name: "gateway".into(), token: Secret::new("t-gateway-0123456789") },
            ServiceToken { name: "batch".into(), token: Secret::new("t-batch-0123456789") },
        ]);
        assert_eq!(tokens.find(b"t-gateway-0123456789"), Some("gateway"));
        assert_eq!(tokens.find(b"t-batch-0123456789"), Some("batch"));
        for wrong in [&b"t-gateway-012345678"[..], b"t-gateway-01234567890", b"", b"T-GATEWAY-0123456789"] {
            assert_eq!(tokens.find(wrong), None, "{:?}", String::from_utf8_lossy(wrong));
        }
        assert!(!format!("{tokens:?}").contains("t-gateway"), "Debug shows a token");
        assert_eq!(ServiceTokens::new(&[]).find(b"anything"), None);
    }
}
