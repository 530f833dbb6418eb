//! Tencent IM UserSig (TLSSigAPIv2): generation, verification and a small cache.
//!
//! The IM leaf ([`super::TencentImService`]) asks a [`UserSigCache`] for the admin's usersig on
//! every call; the fake IM server (`room_service_fakes::fake_im`) calls [`verify`] exactly like Tencent does.
//!
//! Format (SPEC §8): `sig = base64(HMAC-SHA256(key, "TLS.identifier:..\nTLS.sdkappid:..\n
//! TLS.time:..\nTLS.expire:..\n"))`, put in a JSON document, zlib-compressed, base64-encoded
//! with the URL-safe substitutions `+`→`*`, `/`→`-`, `=`→`_`.

mod cache;

use std::io::Read;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

pub use cache::{Clock, UserSigCache};

type HmacSha256 = Hmac<Sha256>;

/// Largest decompressed usersig document accepted by [`verify`] (a real one is ~200 bytes).
const MAX_DOCUMENT_BYTES: u64 = 16 * 1024;

/// What a valid usersig says about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SigInfo {
    /// The user the sig was issued for.
    pub identifier: String,
    /// The application the sig was issued for.
    pub sdk_app_id: u64,
    /// Issue time, seconds since the Unix epoch.
    pub time: u64,
    /// Lifetime in seconds from `time`.
    pub expire: u64,
}

/// Why [`verify`] refused a usersig. Messages never contain the sig or the key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UserSigError {
    /// Not base64, not zlib, not the expected JSON document.
    #[error("usersig cannot be decoded")]
    Undecodable,
    /// The HMAC does not match: wrong key or altered fields.
    #[error("usersig signature does not match")]
    BadSignature,
    /// Issued for another identifier.
    #[error("usersig identifier does not match")]
    IdentifierMismatch,
    /// Issued for another SDKAppID.
    #[error("usersig sdkappid does not match")]
    AppIdMismatch,
    /// `time + expire` is in the past.
    #[error("usersig expired")]
    Expired,
}

/// The HMAC input of TLSSigAPIv2, optionally with a user buffer.
fn content_to_sign(
    identifier: &str,
    sdk_app_id: u64,
    time: u64,
    expire: u64,
    userbuf: Option<&str>,
) -> String {
    let mut content = format!(
        "TLS.identifier:{identifier}\nTLS.sdkappid:{sdk_app_id}\nTLS.time:{time}\nTLS.expire:{expire}\n"
    );
    if let Some(buf) = userbuf {
        content.push_str("TLS.userbuf:");
        content.push_str(buf);
        content.push('\n');
    }
    content
}

fn hmac_for(secret_key: &str, content: &str) -> HmacSha256 {
    let mut mac =
        <HmacSha256 as Mac>::new_from_slice(secret_key.as_bytes()).expect("HMAC accepts keys of any length");
    mac.update(content.as_bytes());
    mac
}

/// The base64 `TLS.sig` field for the given fields.
pub fn signature(secret_key: &str, sdk_app_id: u64, identifier: &str, time: u64, expire: u64) -> String {
    let content = content_to_sign(identifier, sdk_app_id, time, expire, None);
    STANDARD.encode(hmac_for(secret_key, &content).finalize().into_bytes())
}

/// Generates a usersig valid from `now_secs` for `expire_secs`.
pub fn generate(
    secret_key: &str,
    sdk_app_id: u64,
    identifier: &str,
    expire_secs: u64,
    now_secs: u64,
) -> String {
    let sig = signature(secret_key, sdk_app_id, identifier, now_secs, expire_secs);
    let doc = serde_json::json!({
        "TLS.ver": "2.0",
        "TLS.identifier": identifier,
        "TLS.sdkappid": sdk_app_id,
        "TLS.expire": expire_secs,
        "TLS.time": now_secs,
        "TLS.sig": sig,
    });
    let json = doc.to_string();
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    let compressed = std::io::Write::write_all(&mut encoder, json.as_bytes())
        .and_then(|()| encoder.finish())
        .expect("compressing into a Vec cannot fail");
    escape(&STANDARD.encode(compressed))
}

/// Tencent's URL-safe base64: `+ / =` are written `* - _`.
const ESCAPES: [(char, char); 3] = [('+', '*'), ('/', '-'), ('=', '_')];

fn escape(b64: &str) -> String {
    b64.chars().map(|c| ESCAPES.iter().find(|(plain, _)| *plain == c).map_or(c, |&(_, e)| e)).collect()
}

fn unescape(sig: &str) -> String {
    sig.chars().map(|c| ESCAPES.iter().find(|(_, e)| *e == c).map_or(c, |&(plain, _)| plain)).collect()
}

/// Reads a field that official implementations write as a number (some older ones as a string).
fn u64_field(doc: &serde_json::Value, key: &str) -> Result<u64, UserSigError> {
    match doc.get(key) {
        Some(serde_json::Value::Number(n)) => n.as_u64().ok_or(UserSigError::Undecodable),
        Some(serde_json::Value::String(s)) => s.parse().map_err(|_| UserSigError::Undecodable),
        _ => Err(UserSigError::Undecodable),
    }
}

fn str_field<'a>(doc: &'a serde_json::Value, key: &str) -> Result<&'a str, UserSigError> {
    doc.get(key).and_then(serde_json::Value::as_str).ok_or(UserSigError::Undecodable)
}

/// A decoded usersig document.
struct Document {
    info: SigInfo,
    sig: String,
    userbuf: Option<String>,
}

fn decode_document(usersig: &str) -> Result<Document, UserSigError> {
    let compressed = STANDARD.decode(unescape(usersig)).map_err(|_| UserSigError::Undecodable)?;
    let mut json = Vec::new();
    flate2::read::ZlibDecoder::new(compressed.as_slice())
        .take(MAX_DOCUMENT_BYTES)
        .read_to_end(&mut json)
        .map_err(|_| UserSigError::Undecodable)?;
    let doc: serde_json::Value = serde_json::from_slice(&json).map_err(|_| UserSigError::Undecodable)?;
    Ok(Document {
        info: SigInfo {
            identifier: str_field(&doc, "TLS.identifier")?.to_owned(),
            sdk_app_id: u64_field(&doc, "TLS.sdkappid")?,
            time: u64_field(&doc, "TLS.time")?,
            expire: u64_field(&doc, "TLS.expire")?,
        },
        sig: str_field(&doc, "TLS.sig")?.to_owned(),
        userbuf: doc.get("TLS.userbuf").and_then(serde_json::Value::as_str).map(str::to_owned),
    })
}

/// Reads the fields of a usersig without checking its signature or expiry.
pub fn decode(usersig: &str) -> Result<SigInfo, UserSigError> {
    decode_document(usersig).map(|d| d.info)
}

/// Verifies a usersig the way Tencent does: decodable, issued for this identifier and app,
/// signed with this key, not expired at `now_secs`.
pub fn verify(
    usersig: &str,
    secret_key: &str,
    sdk_app_id: u64,
    identifier: &str,
    now_secs: u64,
) -> Result<SigInfo, UserSigError> {
    let document = decode_document(usersig)?;
    if document.info.identifier != identifier {
        return Err(UserSigError::IdentifierMismatch);
    }
    check(document, secret_key, sdk_app_id, now_secs)
}

/// Verifies a usersig the way Tencent does, for whichever identifier it names (a client
/// presenting its own: the identifier is who it is): decodable, issued for this app, signed
/// with this key, not expired at `now_secs`.
pub fn verify_own(
    usersig: &str,
    secret_key: &str,
    sdk_app_id: u64,
    now_secs: u64,
) -> Result<SigInfo, UserSigError> {
    check(decode_document(usersig)?, secret_key, sdk_app_id, now_secs)
}

/// The checks of [`verify`] after the identifier: app, signature, expiry.
fn check(
    document: Document,
    secret_key: &str,
    sdk_app_id: u64,
    now_secs: u64,
) -> Result<SigInfo, UserSigError> {
    let Document { info, sig, userbuf } = document;
    if info.sdk_app_id != sdk_app_id {
        return Err(UserSigError::AppIdMismatch);
    }
    let raw_sig = STANDARD.decode(&sig).map_err(|_| UserSigError::BadSignature)?;
    let content =
        content_to_sign(&info.identifier, info.sdk_app_id, info.time, info.expire, userbuf.as_deref());
    hmac_for(secret_key, &content).verify_slice(&raw_sig).map_err(|_| UserSigError::BadSignature)?;
    if now_secs > info.time.saturating_add(info.expire) {
        return Err(UserSigError::Expired);
    }
    Ok(info)
}

/// Seconds since the Unix epoch from the system clock (0 if the clock is before 1970).
pub fn system_now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

#[cfg(test)]
mod tests;
