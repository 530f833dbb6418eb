//! The hop's seal: every hop is signed by the node that sends it with the cluster's shared
//! secret (`cluster.secret`), and the owner serves only a hop whose seal it can verify. A
//! client's call of the hop's route carries no seal (or a wrong or stale one) and is refused
//! 401 before its body is read as anything.
//!
//! The seal is an HMAC-SHA256 over the send time and the body, `"<unix ms>\n" + body`, in two
//! headers ([`TIME`], [`SIGNATURE`], the MAC in unpadded base64url). A seal older or newer than
//! [`MAX_SKEW`] is refused, so a captured hop cannot be replayed later than that. Verification
//! accepts the signing secret and, during a rotation, a second one (`cluster.secret_previous`;
//! docs/RUNBOOK.md says how to rotate).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ::http::{HeaderMap, HeaderValue};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::config::HopSecrets;
use crate::secret::Secret;

/// Header: when the hop was sealed, in ms since the Unix epoch.
pub const TIME: &str = "x-room-hop-time";
/// Header: the hop's MAC.
pub const SIGNATURE: &str = "x-room-hop-signature";
/// Widest gap between a seal's time and the owner's clock.
pub const MAX_SKEW: Duration = Duration::from_secs(60);

type HmacSha256 = Hmac<Sha256>;

/// Why a seal was refused (for the log; the caller is told only that it is not a node).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// No seal, or a malformed one.
    #[error("the hop carries no valid seal")]
    Missing,
    /// Sealed too long ago, or in the future.
    #[error("the hop's seal is more than 60 s from this node's clock")]
    Stale,
    /// A seal no secret of this cluster made.
    #[error("the hop's seal was not made with this cluster's secret")]
    Forged,
}

/// The keys of the hop: the secret hops are sealed with, and those a seal is accepted from.
#[derive(Clone)]
pub struct Seal {
    signing: Secret,
    accepted: Vec<Secret>,
}

impl std::fmt::Debug for Seal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Seal(..)")
    }
}

impl Seal {
    /// The seal of `secrets`.
    pub fn new(secrets: &HopSecrets) -> Self {
        let accepted = std::iter::once(secrets.signing.clone()).chain(secrets.previous.clone()).collect();
        Self { signing: secrets.signing.clone(), accepted }
    }

    /// Seals `body` at `now`: the two headers added to `headers`.
    pub fn sign(&self, body: &[u8], now: SystemTime, headers: &mut HeaderMap) {
        let time = unix_ms(now);
        let mac = mac(&self.signing, time, body).finalize().into_bytes();
        headers.insert(TIME, HeaderValue::from(time));
        // Cannot fail: base64url is header-safe ASCII.
        if let Ok(signature) = HeaderValue::from_str(&URL_SAFE_NO_PAD.encode(mac)) {
            headers.insert(SIGNATURE, signature);
        }
    }

    /// The time of a seal in `headers`, if there is a well-formed one: checked before the
    /// body is read (a client's call is refused without reading it).
    pub fn time_of(headers: &HeaderMap) -> Result<u64, Refused> {
        let time = headers.get(TIME).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
        match (time, headers.get(SIGNATURE)) {
            (Some(time), Some(_)) => Ok(time),
            _ => Err(Refused::Missing),
        }
    }

    /// Verifies the seal in `headers` over `body` at `now`.
    pub fn verify(&self, headers: &HeaderMap, body: &[u8], now: SystemTime) -> Result<(), Refused> {
        let time = Self::time_of(headers)?;
        let signature = headers
            .get(SIGNATURE)
            .and_then(|v| URL_SAFE_NO_PAD.decode(v.as_bytes()).ok())
            .ok_or(Refused::Missing)?;
        let skew = unix_ms(now).abs_diff(time);
        if u128::from(skew) > MAX_SKEW.as_millis() {
            return Err(Refused::Stale);
        }
        // `verify_slice` compares in constant time.
        let sealed_by = |secret: &Secret| mac(secret, time, body).verify_slice(&signature).is_ok();
        if self.accepted.iter().any(sealed_by) { Ok(()) } else { Err(Refused::Forged) }
    }
}

fn mac(secret: &Secret, time: u64, body: &[u8]) -> HmacSha256 {
    // Cannot fail: HMAC takes a key of any length.
    let mut mac = HmacSha256::new_from_slice(secret.expose().as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
    mac.update(time.to_string().as_bytes());
    mac.update(b"\n");
    mac.update(body);
    mac
}

fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seal(signing: &str, previous: Option<&str>) -> Seal {
        Seal::new(&HopSecrets { signing: Secret::new(signing), previous: previous.map(Secret::new) })
    }

    const A: &str = "a-secret-of-at-least-thirty-two-bytes!!";
    const B: &str = "another-secret-of-thirty-two-bytes-too!";

    #[test]
    fn a_sealed_hop_verifies_and_any_change_to_it_does_not() {
        let (node, now) = (seal(A, None), SystemTime::now());
        let mut headers = HeaderMap::new();
        node.sign(b"{\"op\":\"snapshot\"}", now, &mut headers);
        assert_eq!(node.verify(&headers, b"{\"op\":\"snapshot\"}", now), Ok(()));
        assert_eq!(node.verify(&headers, b"{\"op\":\"members\"}", now), Err(Refused::Forged));
        assert_eq!(seal(B, None).verify(&headers, b"{\"op\":\"snapshot\"}", now), Err(Refused::Forged));
        let mut moved = headers.clone();
        let later = unix_ms(now) + 1;
        moved.insert(TIME, HeaderValue::from(later));
        assert_eq!(
            node.verify(&moved, b"{\"op\":\"snapshot\"}", now),
            Err(Refused::Forged),
            "the time is sealed"
        );
        assert_eq!(node.verify(&HeaderMap::new(), b"", now), Err(Refused::Missing));
        assert!(!format!("{node:?}").contains(A), "never printed");
    }

    #[test]
    fn a_seal_is_good_for_sixty_seconds_either_way() {
        let (node, now) = (seal(A, None), SystemTime::now());
        let mut headers = HeaderMap::new();
        node.sign(b"x", now, &mut headers);
        for (offset, ok) in [(59, true), (61, false)] {
            let d = Duration::from_secs(offset);
            let expect = if ok { Ok(()) } else { Err(Refused::Stale) };
            assert_eq!(node.verify(&headers, b"x", now + d), expect, "+{offset}s");
            assert_eq!(node.verify(&headers, b"x", now - d), expect, "-{offset}s");
        }
    }

    #[test]
    fn a_rotation_accepts_both_secrets_and_signs_with_one() {
        let now = SystemTime::now();
        let (old, rotating, new) = (seal(A, None), seal(A, Some(B)), seal(B, Some(A)));
        for (sender, receiver) in [(&old, &rotating), (&rotating, &new), (&new, &rotating), (&old, &new)] {
            let mut headers = HeaderMap::new();
            sender.sign(b"x", now, &mut headers);
            assert_eq!(receiver.verify(&headers, b"x", now), Ok(()));
        }
        let mut headers = HeaderMap::new();
        new.sign(b"x", now, &mut headers);
        assert_eq!(old.verify(&headers, b"x", now), Err(Refused::Forged), "B is not A's");
    }
}
