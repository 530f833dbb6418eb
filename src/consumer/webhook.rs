//! The activity webhook (SPEC §11.6): each batch is one `POST` of
//! `{"consumer":"webhook","events":[<EventEnvelope>, ...]}` in commit order, signed with
//! `X-Room-Signature: sha256=<lowercase hex HMAC-SHA256(secret, raw body)>`. Any 2xx answer
//! acknowledges the whole batch; anything else fails it, and the consumer sends the same events
//! again after the delivery policy's backoff. The envelopes are the stored JSON, byte for byte,
//! so a retried batch has the same body (and signature) as the first try (unless the consumer's
//! rate limit split the round differently). Redirects are never followed.

use std::time::Duration;

use hmac::{Hmac, Mac};
use reqwest::StatusCode;
use sha2::Sha256;

use super::batch::Sink;
use crate::error_text::reqwest_chain;
use crate::publish::error::SinkError;
use crate::publish::{ErrorClass, Message};
use crate::secret::Secret;

/// The signature header.
pub const SIGNATURE_HEADER: &str = "x-room-signature";

/// `sha256=` and the lowercase hex HMAC-SHA256 of `body` under `secret`: the value of
/// [`SIGNATURE_HEADER`], and what a receiver recomputes to verify it.
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    // HMAC takes keys of any length.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret).unwrap_or_else(|_| unreachable!());
    mac.update(body);
    let hex: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// The body of one batch: the envelopes as stored, in order.
pub fn body(messages: &[Message]) -> String {
    let events: Vec<&str> = messages.iter().flat_map(|m| &m.events).map(|e| &*e.body).collect();
    format!(r#"{{"consumer":"webhook","events":[{}]}}"#, events.join(","))
}

/// POSTs batches to the activity service.
#[derive(Debug, Clone)]
pub struct WebhookSink {
    client: reqwest::Client,
    url: reqwest::Url,
    secret: Secret,
}

impl WebhookSink {
    /// A sink posting to `url`, each POST bounded by `timeout`.
    pub fn new(url: &str, secret: Secret, timeout: Duration) -> anyhow::Result<Self> {
        let url = reqwest::Url::parse(url)?;
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(1)))
            .user_agent(concat!("room-service/", env!("CARGO_PKG_VERSION")))
            // A redirect is an answer, not an acknowledgement: followed, a 301/302 turns the POST
            // into a body-less GET whose 2xx would count as delivered, and a 307/308 would hand
            // the signed body to whatever host it names.
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self { client, url, secret })
    }
}

impl Sink for WebhookSink {
    async fn deliver(&self, messages: Vec<Message>) -> Result<(), SinkError> {
        let body = body(&messages);
        let signature = signature(self.secret.expose().as_bytes(), body.as_bytes());
        let response = self
            .client
            .post(self.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(SIGNATURE_HEADER, signature)
            .body(body)
            .send()
            .await
            .map_err(|e| {
                let class = if e.is_timeout() { ErrorClass::Timeout } else { ErrorClass::Transient };
                SinkError::new(class, format!("webhook: {}", reqwest_chain(e)))
            })?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        Err(SinkError::new(class_of(status), format!("webhook answered {status}")))
    }
}

/// How a non-2xx answer is counted (every one is retried all the same).
fn class_of(status: StatusCode) -> ErrorClass {
    match status {
        StatusCode::TOO_MANY_REQUESTS => ErrorClass::RateLimited,
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN | StatusCode::NOT_FOUND => ErrorClass::Configuration,
        s if s.is_redirection() => ErrorClass::Configuration,
        s if s.is_client_error() => ErrorClass::Permanent,
        _ => ErrorClass::Transient,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::publish::{Event, Path, Priority};

    #[test]
    fn signature_matches_a_known_hmac_sha256_vector() {
        // RFC 4231, test case 2.
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn body_holds_the_stored_envelopes_in_order() {
        let message = |id: &str| {
            let event = Event {
                event_id: id.into(),
                event_type: "RoomGiftSent",
                priority: Priority::High,
                body: Arc::from(format!(r#"{{"event_id":"{id}"}}"#)),
                sender: None,
                seated: Default::default(),
                trace: None,
                admin: None,
            };
            Message::new("r".into(), Path::Webhook, vec![event])
        };
        let body = body(&[message("a"), message("b")]);
        assert_eq!(body, r#"{"consumer":"webhook","events":[{"event_id":"a"},{"event_id":"b"}]}"#);
        let parsed: serde_json::Value = serde_json::from_str(&body).expect("valid JSON");
        assert_eq!(parsed["events"][1]["event_id"], "b");
    }

    #[test]
    fn every_non_2xx_answer_has_a_class() {
        assert_eq!(class_of(StatusCode::TOO_MANY_REQUESTS), ErrorClass::RateLimited);
        assert_eq!(class_of(StatusCode::UNAUTHORIZED), ErrorClass::Configuration);
        assert_eq!(class_of(StatusCode::BAD_REQUEST), ErrorClass::Permanent);
        assert_eq!(class_of(StatusCode::MOVED_PERMANENTLY), ErrorClass::Configuration);
        assert_eq!(class_of(StatusCode::BAD_GATEWAY), ErrorClass::Transient);
    }
}
