//! The `send_group_msg` wire format: request body, answer, and how an answer maps to success
//! or an [`ImError`]. Shared by the client ([`super::TencentImService`]) and the fake server
//! (`room_service_fakes::fake_im`) so both speak exactly the same JSON.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::error::{ImError, shorten};
use crate::publish::{Message, Priority};

/// Path of the API, appended to the base URL.
pub const SEND_GROUP_MSG_PATH: &str = "/v4/group_open_http_svc/send_group_msg";

/// Largest serialized request body accepted by the fake (and sent): a message's content is
/// bounded by `im_batch.max_bytes` (at most Tencent's 12 KB), and JSON escaping of the
/// envelopes inside it adds at most this much again.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Longest custom `GroupId` Tencent accepts, in bytes.
pub const MAX_GROUP_ID_BYTES: usize = 48;

/// `Random` of an event: the first 4 bytes of SHA-256(event_id), so every retry of the event
/// sends the identical body and Tencent's 5-minute dedup drops repeats.
pub fn random_for(event_id: &str) -> u32 {
    random_for_pack([event_id])
}

/// `Random` of a message: the first 4 bytes of SHA-256 of its event ids joined by `,`, in
/// order (for one event, [`random_for`] its id), so the identical pack sends the identical
/// body on a retry.
pub fn random_for_pack<'a>(event_ids: impl IntoIterator<Item = &'a str>) -> u32 {
    let mut hasher = Sha256::new();
    for (i, id) in event_ids.into_iter().enumerate() {
        if i > 0 {
            hasher.update(b",");
        }
        hasher.update(id.as_bytes());
    }
    let digest = hasher.finalize();
    u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// Body of `send_group_msg`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SendGroupMsg {
    /// Prefix + room id.
    pub group_id: String,
    /// Dedup key, see [`random_for_pack`].
    pub random: u32,
    /// One custom element per event, in order, each carrying its envelope.
    pub msg_body: Vec<MsgElem>,
    /// JSON string `{"event_ids": [...]}`.
    pub cloud_custom_data: String,
    /// `"High"` or `"Normal"`: the highest of its events'.
    pub msg_priority: String,
}

/// One message element.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct MsgElem {
    /// Always `"TIMCustomElem"` here.
    pub msg_type: String,
    /// The custom payload.
    pub msg_content: CustomContent,
}

/// Content of a `TIMCustomElem`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CustomContent {
    /// The envelope JSON, as a string.
    pub data: String,
    /// The event type.
    pub desc: String,
}

/// What `CloudCustomData` holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CloudCustomData {
    /// The ids of the message's events, in element order, for receivers to dedup on.
    #[serde(default)]
    pub event_ids: Vec<String>,
    /// What a single-event message carried before packing (still read by the fake).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
}

impl CloudCustomData {
    /// Every event id it names.
    pub fn ids(self) -> Vec<String> {
        let mut ids = self.event_ids;
        if ids.is_empty() {
            ids.extend(self.event_id);
        }
        ids
    }
}

impl SendGroupMsg {
    /// The body for `message`, its group id prefixed.
    pub fn for_message(group_id_prefix: &str, message: &Message) -> Self {
        let ids: Vec<&str> = message.events.iter().map(|e| e.event_id.as_str()).collect();
        Self {
            group_id: format!("{group_id_prefix}{}", message.group),
            random: random_for_pack(ids.iter().copied()),
            msg_body: message
                .events
                .iter()
                .map(|event| MsgElem {
                    msg_type: "TIMCustomElem".to_owned(),
                    msg_content: CustomContent {
                        data: event.body.to_string(),
                        desc: event.event_type.to_owned(),
                    },
                })
                .collect(),
            // What `CloudCustomData` decodes, built as a `Value`, whose rendering cannot fail
            // (string keys only).
            cloud_custom_data: serde_json::json!({ "event_ids": ids }).to_string(),
            msg_priority: match message.priority() {
                Priority::High => "High",
                Priority::Normal => "Normal",
            }
            .to_owned(),
        }
    }

    /// The content's size: every element's `Data` and `Desc`, in bytes (what Tencent bounds
    /// at 12 KB).
    pub fn content_bytes(&self) -> usize {
        self.msg_body.iter().map(|e| e.msg_content.data.len() + e.msg_content.desc.len()).sum()
    }

    /// The serialized body, or [`ImError::TooLarge`] when its content passes `max_content`
    /// bytes (or [`ImError::GroupIdTooLong`] over [`MAX_GROUP_ID_BYTES`]; or
    /// [`ImError::Undecodable`] for a message without events).
    pub fn to_bytes(&self, max_content: usize) -> Result<Vec<u8>, ImError> {
        if self.group_id.len() > MAX_GROUP_ID_BYTES {
            return Err(ImError::GroupIdTooLong { len: self.group_id.len(), limit: MAX_GROUP_ID_BYTES });
        }
        if self.msg_body.is_empty() {
            return Err(ImError::Undecodable("a message without events"));
        }
        let content = self.content_bytes();
        if content > max_content {
            return Err(ImError::TooLarge { size: content, limit: max_content });
        }
        serde_json::to_vec(self).map_err(|_| ImError::Undecodable("unserializable"))
    }
}

/// Tencent's answer. Every field is optional on the way in; unknown fields are ignored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Answer {
    /// `"OK"` or `"FAIL"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_status: Option<String>,
    /// 0 on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<i64>,
    /// Human text; may be absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_info: Option<String>,
    /// Server time of the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg_time: Option<u64>,
    /// Sequence number of the message in its group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg_seq: Option<u64>,
    /// Non-empty when frequency control dropped the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg_drop_reason: Option<String>,
}

impl Answer {
    /// A success answer.
    pub fn ok(msg_time: u64, msg_seq: u64) -> Self {
        Self {
            action_status: Some("OK".into()),
            error_code: Some(0),
            error_info: Some(String::new()),
            msg_time: Some(msg_time),
            msg_seq: Some(msg_seq),
            msg_drop_reason: None,
        }
    }

    /// The success answer of a call that sends no message (the group admin APIs).
    pub fn done() -> Self {
        Self {
            action_status: Some("OK".into()),
            error_code: Some(0),
            error_info: Some(String::new()),
            ..Self::default()
        }
    }

    /// A failure answer.
    pub fn fail(code: i64, info: impl Into<String>) -> Self {
        Self {
            action_status: Some("FAIL".into()),
            error_code: Some(code),
            error_info: Some(info.into()),
            ..Self::default()
        }
    }
}

/// Maps an HTTP status and body to success or an [`ImError`].
pub fn interpret(status: u16, body: &[u8]) -> Result<(), ImError> {
    if status != 200 {
        return Err(ImError::HttpStatus(status));
    }
    let answer: Answer =
        serde_json::from_slice(body).map_err(|_| ImError::Undecodable("not a json answer"))?;
    let code = answer.error_code.ok_or(ImError::Undecodable("no ErrorCode"))?;
    if code != 0 {
        return Err(ImError::im(code, answer.error_info.as_deref().unwrap_or("")));
    }
    if answer.action_status.as_deref() != Some("OK") {
        return Err(ImError::Undecodable("ErrorCode 0 without ActionStatus OK"));
    }
    match answer.msg_drop_reason.as_deref() {
        Some(reason) if !reason.is_empty() => Err(ImError::Dropped(shorten(reason))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
