//! How the leaf delivers one [`Message`]: its message (`send_group_msg`) unless every event
//! carries an admin call that goes alone, then each event's [`AdminCall`] in order (SPEC §14.2;
//! the delivery core sends an event with an admin call in a message of its own, the rest is
//! defensive). Every HTTP call carries the usersig in its query, so URLs never leave this
//! module; a usersig Tencent refuses (70001/70052) is regenerated and the call sent once more.

use std::sync::Arc;

use reqwest::Url;

use super::error::ImError;
use super::wire::{self, SendGroupMsg};
use super::{Inner, admin_wire};
use crate::publish::{AdminApi, AdminCall, Message, Outcome};
use crate::telemetry::traces;

/// Largest answer body read; Tencent's answers are a few hundred bytes.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// One HTTP call of the leaf.
struct Request {
    /// The admin API called; `None` for `send_group_msg`.
    admin: Option<AdminApi>,
    /// The serialized body.
    body: Vec<u8>,
    /// The query's `random`.
    random: u32,
    /// Events of the message it serves.
    events: usize,
}

impl Request {
    /// The API's name: the `im` span's `api` field.
    fn api(&self) -> &'static str {
        self.admin.map_or("send_group_msg", AdminApi::as_str)
    }
}

/// Milliseconds since the epoch, by the system clock (what `until_ms` is counted in).
fn system_now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

/// The part of `message` that goes out as a group message: every event but those whose admin
/// call goes alone (`after_message: false`); `None` when nothing is left.
fn message_part(mut message: Message) -> Option<Message> {
    message.events.retain(|e| e.admin.as_ref().is_none_or(|call| call.after_message));
    (!message.events.is_empty()).then_some(message)
}

impl Inner {
    /// Sends `message`, then the admin calls of its events, in order; the first failure ends it.
    pub(super) async fn deliver(&self, message: Message) -> Result<Outcome, ImError> {
        let calls: Vec<Arc<AdminCall>> = message.events.iter().filter_map(|e| e.admin.clone()).collect();
        if calls.is_empty() {
            return self.send_message(&message).await;
        }
        let group = message.group.clone();
        if let Some(part) = message_part(message) {
            self.send_message(&part).await?;
        }
        for call in &calls {
            self.send_admin(&group, call).await?;
        }
        Ok(Outcome::Delivered)
    }

    /// `send_group_msg` of `message`, refused before anything is sent when it does not fit.
    async fn send_message(&self, message: &Message) -> Result<Outcome, ImError> {
        let request = SendGroupMsg::for_message(&self.group_id_prefix, message);
        let body = request.to_bytes(self.max_content_bytes)?;
        let events = message.events.len();
        self.send_retrying(Request { admin: None, body, random: request.random, events }).await?;
        Ok(Outcome::Delivered)
    }

    /// The admin call `call` on `group`'s IM group, its mute or ban counted from now.
    async fn send_admin(&self, group: &str, call: &AdminCall) -> Result<(), ImError> {
        let group_id = format!("{}{group}", self.group_id_prefix);
        let now_ms = system_now_ms();
        if call.api == AdminApi::BanGroupMember
            && admin_wire::seconds_left(call.until_ms.unwrap_or(0), now_ms) == 0
        {
            // The ban is over (a late retry or a requeue): nothing to ban, and a Duration of 0
            // is no ban Tencent documents.
            return Ok(());
        }
        let body = admin_wire::to_bytes(call, &group_id, now_ms)?;
        let random = wire::random_for_pack([group_id.as_str(), call.api.as_str()]);
        self.send_retrying(Request { admin: Some(call.api), body, random, events: 1 }).await
    }

    /// One call; when Tencent refused the usersig (expired or revoked), one immediate retry
    /// with a fresh one, within the same attempt (same body and Random, so Tencent dedups a
    /// repeated message).
    async fn send_retrying(&self, request: Request) -> Result<(), ImError> {
        match self.send(&request).await {
            Err(err) if matches!(err.im_code(), Some(70001 | 70052)) => self.send(&request).await,
            other => other,
        }
    }

    /// The request URL; it carries the usersig, so it never leaves this module.
    fn url(&self, admin: Option<AdminApi>, random: u32) -> Url {
        let mut url = match admin.and_then(|api| self.admin_endpoints.get(&api)) {
            Some(endpoint) => endpoint.clone(),
            None => self.endpoint.clone(),
        };
        let usersig = self.usersig.get();
        url.query_pairs_mut()
            .append_pair("sdkappid", &self.sdk_app_id)
            .append_pair("identifier", &self.admin_identifier)
            .append_pair("usersig", usersig.expose())
            .append_pair("random", &random.to_string())
            .append_pair("contenttype", "json");
        url
    }

    /// One call, in an `im` span of the message's trace when traces are exported: the API, the
    /// body's size in bytes, the message's events, Tencent's HTTP status and `ErrorCode`.
    async fn send(&self, request: &Request) -> Result<(), ImError> {
        use tracing::Instrument;
        let span = traces::span_if_on(|| {
            tracing::info_span!(
                "im",
                api = request.api(),
                bytes = request.body.len(),
                events = request.events,
                error_code = tracing::field::Empty,
                status = tracing::field::Empty
            )
        });
        let sent = self.call_im(request).instrument(span.clone()).await;
        if let Err(error) = &sent {
            if let Some(code) = error.im_code() {
                span.record("error_code", code);
            }
            span.record("status", tracing::field::display(error));
        }
        sent
    }

    async fn call_im(&self, request: &Request) -> Result<(), ImError> {
        let mut response = self
            .client
            .post(self.url(request.admin, request.random))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(request.body.clone())
            .send()
            .await
            .map_err(ImError::from_reqwest)?;
        let status = response.status().as_u16();
        let mut answer = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(ImError::from_reqwest)? {
            if answer.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(if status == 200 {
                    ImError::Undecodable("answer too large")
                } else {
                    ImError::HttpStatus(status)
                });
            }
            answer.extend_from_slice(&chunk);
        }
        let interpreted = match request.admin {
            None => wire::interpret(status, &answer),
            Some(api) => admin_wire::interpret(api, status, &answer),
        };
        if let Err(err) = &interpreted
            && let Some(code @ (70001 | 70052)) = err.im_code()
        {
            tracing::warn!(code, api = request.api(), "Usersig rejected; regenerating it");
            self.usersig.invalidate();
        }
        interpreted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::publish::test_support::message;
    use crate::publish::{AdminApi, Path};

    fn with_admin(mut message: Message, after_message: bool) -> Message {
        let call = AdminCall {
            api: AdminApi::CreateGroup,
            fields: Default::default(),
            until_ms: None,
            after_message,
            share: None,
        };
        message.events[0].admin = Some(Arc::new(call));
        message
    }

    #[test]
    fn an_admin_call_that_goes_alone_leaves_no_message() {
        let alone = with_admin(message("RoomCreated", Path::Sync), false);
        assert!(message_part(alone).is_none());
        let after = with_admin(message("RoomClosed", Path::Sync), true);
        assert_eq!(message_part(after).map(|m| m.events.len()), Some(1));
    }

    #[test]
    fn a_pack_keeps_its_other_events_in_its_message() {
        let mut pack = message("RoomUserJoined", Path::Worker);
        let created = with_admin(message("RoomCreated", Path::Worker), false).events.remove(0);
        pack.events.insert(0, created);
        let part = message_part(pack).expect("the join stays");
        assert_eq!(part.events.iter().map(|e| e.event_type).collect::<Vec<_>>(), ["RoomUserJoined"]);
    }
}
