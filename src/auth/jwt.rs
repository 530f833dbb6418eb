//! `auth.mode: jwt`: a JWT names the caller, verified by `jsonwebtoken` with the key of its
//! algorithm's family — the HS* secret for HS*, the PEM public key or the JWKS key of its
//! `kid` for the rest — and only for the algorithms of `auth.jwt.algorithms` (so `alg: none`,
//! and an HS256 token "signed" with our public key, are refused). `exp` is required, `nbf`
//! checked when present, both within `leeway`; `iss` and `aud` when configured. The user is
//! the string claim `user_claim`.

use std::sync::Arc;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, Validation};

use super::jwks::{Jwks, UNKNOWN_KID_REFETCH};
use super::{Reason, SetupError, TokenUser};
use crate::config::JwtSettings;
use crate::domain::UserId;

/// Verifies JWTs as `auth.jwt.*` says.
#[derive(Debug)]
pub struct JwtVerifier {
    /// One per family accepted (the crate checks every algorithm of a validation against the
    /// key's family), each with that family's algorithms.
    validations: Vec<(AlgorithmFamily, Validation)>,
    user_claim: String,
    /// The HS* key.
    secret: Option<DecodingKey>,
    /// The key(s) of the other families.
    public: PublicKeys,
}

#[derive(Debug)]
enum PublicKeys {
    /// Only HS* is accepted.
    None,
    /// One PEM key, parsed for each family accepted.
    Pem(Vec<(AlgorithmFamily, Arc<DecodingKey>)>),
    /// A JWKS endpoint.
    Jwks(Jwks),
}

impl JwtVerifier {
    /// A verifier for `settings`: reads the PEM file, or fetches the JWKS once with `client`.
    pub async fn new(settings: &JwtSettings, client: reqwest::Client) -> Result<Self, SetupError> {
        let verifier = Self::without_jwks(settings)?;
        let public = match &settings.jwks_url {
            Some(url) => {
                let jwks = Jwks::new(url.clone(), client, settings.jwks_refresh, UNKNOWN_KID_REFETCH);
                jwks.fetch().await;
                PublicKeys::Jwks(jwks)
            }
            None => verifier.public,
        };
        Ok(Self { public, ..verifier })
    }

    /// A verifier with its HS secret and PEM key (a JWKS URL is left for [`Self::new`]).
    fn without_jwks(settings: &JwtSettings) -> Result<Self, SetupError> {
        let mut validations: Vec<(AlgorithmFamily, Validation)> = Vec::new();
        for alg in &settings.algorithms {
            match validations.iter_mut().find(|(family, _)| *family == alg.family()) {
                Some((_, validation)) => validation.algorithms.push(*alg),
                None => validations.push((alg.family(), validation(settings, *alg))),
            }
        }
        let secret = match &settings.secret {
            Some(secret) => Some(DecodingKey::from_secret(secret.expose().as_bytes()).map_err(|e| {
                SetupError { key: "auth.jwt.secret", reason: format!("not a usable HMAC key ({e})") }
            })?),
            None => None,
        };
        let public = match &settings.public_key_file {
            Some(path) => PublicKeys::Pem(pem_keys(path, &settings.algorithms)?),
            None => PublicKeys::None,
        };
        Ok(Self { validations, user_claim: settings.user_claim.clone(), secret, public })
    }

    /// The user `token` names, if it verifies, and its `exp`.
    pub async fn verify(&self, token: &str) -> Result<TokenUser, Reason> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| header_reason(token, e.kind()))?;
        let family = header.alg.family();
        let validation = self
            .validations
            .iter()
            .find(|(f, v)| *f == family && v.algorithms.contains(&header.alg))
            .map(|(_, v)| v)
            .ok_or(Reason::Algorithm)?;
        let claims = match (&self.public, family) {
            (_, AlgorithmFamily::Hmac) => {
                decode(token, self.secret.as_ref().ok_or(Reason::Algorithm)?, validation)?
            }
            (PublicKeys::Pem(keys), family) => {
                let key = keys.iter().find(|(f, _)| *f == family).map(|(_, k)| k).ok_or(Reason::Algorithm)?;
                decode(token, key, validation)?
            }
            (PublicKeys::Jwks(jwks), family) => {
                let key = jwks.key(header.kid.as_deref()).await?;
                if key.family() != family {
                    return Err(Reason::Algorithm);
                }
                decode(token, &key, validation)?
            }
            (PublicKeys::None, _) => return Err(Reason::Algorithm),
        };
        let user = claims.get(&self.user_claim).and_then(serde_json::Value::as_str).ok_or(Reason::Claim)?;
        let user = UserId::parse(user).map_err(|_| Reason::Claim)?;
        Ok(TokenUser { user, expires_at: claims.get("exp").and_then(serde_json::Value::as_u64) })
    }
}

/// The checks of `auth.jwt.*` for tokens of `alg`: `exp` required, `nbf` when present, both
/// within the leeway; `iss` and `aud` required and checked when configured.
fn validation(settings: &JwtSettings, alg: Algorithm) -> Validation {
    let mut validation = Validation::new(alg);
    validation.leeway = settings.leeway.as_secs();
    validation.validate_nbf = true;
    let mut required = vec!["exp"];
    if let Some(issuer) = &settings.issuer {
        validation.set_issuer(&[issuer]);
        required.push("iss");
    }
    match &settings.audience {
        Some(audience) => {
            validation.set_audience(&[audience]);
            required.push("aud");
        }
        None => validation.validate_aud = false,
    }
    validation.set_required_spec_claims(&required);
    validation
}

/// The claims of `token` if it verifies with `key` under `validation`.
fn decode(
    token: &str,
    key: &DecodingKey,
    validation: &Validation,
) -> Result<serde_json::Map<String, serde_json::Value>, Reason> {
    jsonwebtoken::decode(token, key, validation).map(|data| data.claims).map_err(|e| reason(e.kind()))
}

/// The PEM public key at `path`, parsed for every non-HS family of `algorithms`.
fn pem_keys(
    path: &std::path::Path,
    algorithms: &[Algorithm],
) -> Result<Vec<(AlgorithmFamily, Arc<DecodingKey>)>, SetupError> {
    const KEY: &str = "auth.jwt.public_key_file";
    let pem = std::fs::read(path)
        .map_err(|e| SetupError { key: KEY, reason: format!("cannot read {}: {e}", path.display()) })?;
    let mut keys: Vec<(AlgorithmFamily, Arc<DecodingKey>)> = Vec::new();
    for alg in algorithms {
        let family = alg.family();
        if family == AlgorithmFamily::Hmac || keys.iter().any(|(f, _)| *f == family) {
            continue;
        }
        let (key, kind) = match family {
            AlgorithmFamily::Rsa => (DecodingKey::from_rsa_pem(&pem), "an RSA"),
            AlgorithmFamily::Ec => (DecodingKey::from_ec_pem(&pem), "an EC"),
            _ => (DecodingKey::from_ed_pem(&pem), "an Ed25519"),
        };
        let key = key.map_err(|e| SetupError {
            key: KEY,
            reason: format!("{} is not {kind} public key in PEM, as {alg:?} needs ({e})", path.display()),
        })?;
        keys.push((family, Arc::new(key)));
    }
    Ok(keys)
}

/// The refusal reason of a header `jsonwebtoken` could not read: `algorithm` when it is a JSON
/// object naming an `alg` no key takes (`none`, or a name `jsonwebtoken` does not know), else
/// what the error says.
fn header_reason(token: &str, kind: &ErrorKind) -> Reason {
    use base64::Engine;
    let named_alg = token
        .split('.')
        .next()
        .and_then(|part| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part).ok())
        .and_then(|json| serde_json::from_slice::<serde_json::Value>(&json).ok())
        .is_some_and(|header| header.get("alg").is_some_and(serde_json::Value::is_string));
    if named_alg && matches!(kind, ErrorKind::Json(_)) { Reason::Algorithm } else { reason(kind) }
}

/// The refusal reason of a `jsonwebtoken` error.
fn reason(kind: &ErrorKind) -> Reason {
    match kind {
        ErrorKind::InvalidSignature => Reason::BadSignature,
        ErrorKind::ExpiredSignature => Reason::Expired,
        ErrorKind::ImmatureSignature => Reason::NotYetValid,
        ErrorKind::InvalidIssuer => Reason::WrongIssuer,
        ErrorKind::InvalidAudience => Reason::WrongAudience,
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm | ErrorKind::InvalidAlgorithmName => {
            Reason::Algorithm
        }
        ErrorKind::MissingRequiredClaim(claim) if claim == "iss" => Reason::WrongIssuer,
        ErrorKind::MissingRequiredClaim(claim) if claim == "aud" => Reason::WrongAudience,
        ErrorKind::MissingRequiredClaim(_) | ErrorKind::InvalidClaimFormat(_) | ErrorKind::InvalidSubject => {
            Reason::Claim
        }
        _ => Reason::Malformed,
    }
}

#[cfg(test)]
mod tests;
