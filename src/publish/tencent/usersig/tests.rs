//! Unit tests of the usersig module against the official test vector (SPEC §8).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::*;
use crate::secret::Secret;

const KEY: &str = "5bd2850fff3ecb11d7c805251c51ee463a25727bddc2385f3fa8bfee1bb93b5e";
const APP: u64 = 1_400_000_000;
const ID: &str = "xiaojun";
const TIME: u64 = 1_700_000_000;
const EXPIRE: u64 = 15_552_000;
const OFFICIAL_SIG: &str = "LvA7d/Iw7gSsnskvVzBDPOCCDbuNCw4GHwTC0bip+B4=";
const OFFICIAL_USERSIG: &str = "eJyrVgrxCdYrSy1SslJQMtIzUNJRAItkpqTmlWSmZUIkKjIT87NK82CSxSnZiQUFmSlAKUMTAyiAyqVWFGQWpYJkTE1NjRDiJZm5YFFzNPXFmekgG3zKHM1T9D3LzdODi-OKs8vCqpxcAvydnV2SSv2cy03cPcpDnA2SMgu0nUxslWoBHdYzUg__";

#[test]
fn signature_matches_the_official_vector() {
    assert_eq!(signature(KEY, APP, ID, TIME, EXPIRE), OFFICIAL_SIG);
}

#[test]
fn official_usersig_verifies_inside_its_window() {
    let info = verify(OFFICIAL_USERSIG, KEY, APP, ID, TIME + 1000).expect("valid");
    assert_eq!(info, SigInfo { identifier: ID.into(), sdk_app_id: APP, time: TIME, expire: EXPIRE });
    // The last valid second.
    assert!(verify(OFFICIAL_USERSIG, KEY, APP, ID, TIME + EXPIRE).is_ok());
}

#[test]
fn official_usersig_is_expired_after_its_window() {
    assert_eq!(verify(OFFICIAL_USERSIG, KEY, APP, ID, TIME + EXPIRE + 1), Err(UserSigError::Expired));
}

#[test]
fn generated_usersig_round_trips_and_carries_the_official_sig() {
    let usersig = generate(KEY, APP, ID, EXPIRE, TIME);
    assert!(!usersig.contains(['+', '/', '=']));
    assert_eq!(verify(&usersig, KEY, APP, ID, TIME).map(|i| i.time), Ok(TIME));
    let doc = decode_document(&usersig).expect("decodes");
    assert_eq!(doc.sig, OFFICIAL_SIG);
}

#[test]
fn wrong_key_is_a_bad_signature() {
    let usersig = generate("another-key", APP, ID, EXPIRE, TIME);
    assert_eq!(verify(&usersig, KEY, APP, ID, TIME), Err(UserSigError::BadSignature));
    assert_eq!(verify(OFFICIAL_USERSIG, "nope", APP, ID, TIME), Err(UserSigError::BadSignature));
}

#[test]
fn identifier_and_app_mismatches_are_distinguished() {
    assert_eq!(verify(OFFICIAL_USERSIG, KEY, APP, "someone", TIME), Err(UserSigError::IdentifierMismatch));
    assert_eq!(verify(OFFICIAL_USERSIG, KEY, APP + 1, ID, TIME), Err(UserSigError::AppIdMismatch));
}

#[test]
fn garbage_is_undecodable() {
    for input in ["", "not base64 !!", "aGVsbG8_", "eJyrVgrxCdYr"] {
        assert_eq!(verify(input, KEY, APP, ID, TIME), Err(UserSigError::Undecodable), "{input}");
    }
    // Valid zlib + base64, but not a usersig document.
    let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut enc, br#"{"TLS.ver":"2.0"}"#).unwrap();
    let s = escape(&STANDARD.encode(enc.finish().unwrap()));
    assert_eq!(verify(&s, KEY, APP, ID, TIME), Err(UserSigError::Undecodable));
}

#[test]
fn tampered_time_is_a_bad_signature() {
    let doc = decode_document(OFFICIAL_USERSIG).unwrap();
    let forged = serde_json::json!({
        "TLS.ver": "2.0", "TLS.identifier": ID, "TLS.sdkappid": APP,
        "TLS.expire": EXPIRE * 10, "TLS.time": TIME, "TLS.sig": doc.sig,
    });
    let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut enc, forged.to_string().as_bytes()).unwrap();
    let s = escape(&STANDARD.encode(enc.finish().unwrap()));
    assert_eq!(verify(&s, KEY, APP, ID, TIME), Err(UserSigError::BadSignature));
}

fn manual_clock() -> (Arc<AtomicU64>, Clock) {
    let now = Arc::new(AtomicU64::new(TIME));
    let read = now.clone();
    (now, Arc::new(move || read.load(Ordering::Relaxed)))
}

#[test]
fn cache_reuses_until_half_the_ttl_is_gone() {
    let (now, clock) = manual_clock();
    let cache = UserSigCache::with_clock(Secret::new(KEY), APP, ID, Duration::from_secs(100), clock);
    let first = cache.get();
    assert_eq!(cache.generations(), 1);
    now.store(TIME + 49, Ordering::Relaxed);
    assert_eq!(cache.get(), first);
    assert_eq!(cache.generations(), 1);
    now.store(TIME + 50, Ordering::Relaxed);
    let second = cache.get();
    assert_ne!(second, first);
    assert_eq!(cache.generations(), 2);
    let info = verify(second.expose(), KEY, APP, ID, TIME + 50).expect("valid");
    assert_eq!((info.time, info.expire), (TIME + 50, 100));
}

#[test]
fn cache_regenerates_after_invalidate() {
    let (_now, clock) = manual_clock();
    let cache = UserSigCache::with_clock(Secret::new(KEY), APP, ID, Duration::from_secs(100), clock);
    cache.get();
    cache.get();
    assert_eq!(cache.generations(), 1);
    cache.invalidate();
    cache.get();
    assert_eq!(cache.generations(), 2);
}

#[test]
fn cache_debug_shows_no_secret() {
    let cache = UserSigCache::new(Secret::new(KEY), APP, ID, Duration::from_secs(100));
    let sig = cache.get();
    let debug = format!("{cache:?}");
    assert!(!debug.contains(KEY) && !debug.contains(sig.expose()), "{debug}");
}

#[test]
fn verify_own_takes_the_identifier_the_sig_names_and_checks_the_rest() {
    let sig = generate(KEY, APP, "bob", 100, TIME);
    assert_eq!(verify_own(&sig, KEY, APP, TIME + 100).expect("valid").identifier, "bob");
    assert_eq!(verify_own(&sig, "other-key", APP, TIME), Err(UserSigError::BadSignature));
    assert_eq!(verify_own(&sig, KEY, APP + 1, TIME), Err(UserSigError::AppIdMismatch));
    assert_eq!(verify_own(&sig, KEY, APP, TIME + 101), Err(UserSigError::Expired));
    assert_eq!(verify_own("not a sig", KEY, APP, TIME), Err(UserSigError::Undecodable));
}
