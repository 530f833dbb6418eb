//! The wire format of the group admin APIs (SPEC §14.2, `TENCENT_IM_ADMIN.md`): the body the
//! leaf sends for an [`AdminCall`], the limits Tencent documents, and how an answer maps to
//! success or an [`ImError`]. Shared by the client ([`super::TencentImService`]) and the fake
//! server (`room_service_fakes::fake_im`), like [`super::wire`] is for `send_group_msg`; the
//! answer is [`super::wire::Answer`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::ImError;
use super::wire::{self, MAX_GROUP_ID_BYTES};
use crate::publish::{AdminApi, AdminCall};

/// The only group type the service creates (a live room's group).
pub const AVCHATROOM: &str = "AVChatRoom";
/// Most accounts one `forbid_send_msg` call names.
pub const MAX_MUTE_ACCOUNTS: usize = 500;
/// Most accounts one `ban_group_member` / `unban_group_member` call names.
pub const MAX_BAN_ACCOUNTS: usize = 20;
/// Longest group `Name`, in bytes (Tencent's SDK).
pub const MAX_NAME_BYTES: usize = 30;
/// Longest `Notification`, in bytes (Tencent's SDK).
pub const MAX_NOTIFICATION_BYTES: usize = 300;
/// Longest `Introduction`, in bytes (Tencent's SDK).
pub const MAX_INTRODUCTION_BYTES: usize = 240;
/// Longest `FaceUrl`, in bytes (Tencent's SDK).
pub const MAX_FACE_URL_BYTES: usize = 100;
/// Longest ban `Description`, in bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 1_000;

/// The longest prefix of `text` that fits in `max` bytes, cut at a character boundary: what
/// IM gets of a room's title, announcement or cover (the room keeps the full value).
pub fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let end = (0..=max).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
    &text[..end]
}

/// Whole seconds left until `until_ms` at `now_ms` (both ms since the epoch), rounded up; 0
/// once past: a mute or ban sent late never lasts longer than asked.
pub fn seconds_left(until_ms: i64, now_ms: i64) -> u64 {
    let left = until_ms.saturating_sub(now_ms);
    if left <= 0 { 0 } else { u64::try_from(left).map_or(0, |ms| ms.div_ceil(1000)) }
}

/// The request body of `call` for `group_id` (prefix + room id) sent at `now_ms`: its fields,
/// `GroupId`, and — for a mute or a ban — `MuteTime` or `Duration` from [`seconds_left`].
pub fn body(call: &AdminCall, group_id: &str, now_ms: i64) -> Map<String, Value> {
    let mut body = call.fields.clone();
    body.insert("GroupId".to_owned(), group_id.into());
    let left = seconds_left(call.until_ms.unwrap_or(0), now_ms);
    match call.api {
        AdminApi::ForbidSendMsg => {
            body.insert("MuteTime".to_owned(), left.into());
        }
        AdminApi::BanGroupMember => {
            body.insert("Duration".to_owned(), left.into());
        }
        _ => {}
    }
    body
}

/// [`body`] serialized, or [`ImError::GroupIdTooLong`] (nothing sent) over
/// [`MAX_GROUP_ID_BYTES`].
pub fn to_bytes(call: &AdminCall, group_id: &str, now_ms: i64) -> Result<Vec<u8>, ImError> {
    if group_id.len() > MAX_GROUP_ID_BYTES {
        return Err(ImError::GroupIdTooLong { len: group_id.len(), limit: MAX_GROUP_ID_BYTES });
    }
    serde_json::to_vec(&body(call, group_id, now_ms)).map_err(|_| ImError::Undecodable("unserializable"))
}

/// Maps an answer of `api` to success or an [`ImError`] as [`wire::interpret`] does; a code
/// meaning the work is done already ([`AdminApi::done_already`]) is success. A refusal's
/// `ErrorInfo` is prefixed with the API's name, so a parked row's reason says which call failed.
pub fn interpret(api: AdminApi, status: u16, body: &[u8]) -> Result<(), ImError> {
    match wire::interpret(status, body) {
        Err(ImError::Im { code, .. }) if api.done_already(code) => Ok(()),
        Err(ImError::Im { code, info }) => Err(ImError::im(code, &format!("{}: {info}", api.as_str()))),
        other => other,
    }
}

/// Body of `create_group`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateGroup {
    /// Always [`AVCHATROOM`] here.
    #[serde(rename = "Type")]
    pub group_type: String,
    /// Prefix + room id.
    #[serde(rename = "GroupId")]
    pub group_id: String,
    /// The group's name (≤ [`MAX_NAME_BYTES`]).
    #[serde(rename = "Name")]
    pub name: String,
    /// The owner; none for a group the app admin runs.
    #[serde(rename = "Owner_Account", default, skip_serializing_if = "Option::is_none")]
    pub owner_account: Option<String>,
}

/// Body of `destroy_group`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DestroyGroup {
    /// Prefix + room id.
    #[serde(rename = "GroupId")]
    pub group_id: String,
}

/// Body of `forbid_send_msg`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForbidSendMsg {
    /// Prefix + room id.
    #[serde(rename = "GroupId")]
    pub group_id: String,
    /// Who is muted (≤ [`MAX_MUTE_ACCOUNTS`]).
    #[serde(rename = "Members_Account")]
    pub members_account: Vec<String>,
    /// Seconds; 0 lifts the mute, 4294967295 is forever.
    #[serde(rename = "MuteTime")]
    pub mute_time: u64,
}

/// Body of `modify_group_base_info`: only the fields given change.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModifyGroupBaseInfo {
    /// Prefix + room id.
    #[serde(rename = "GroupId")]
    pub group_id: String,
    /// ≤ [`MAX_NAME_BYTES`].
    #[serde(rename = "Name", default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// ≤ [`MAX_NOTIFICATION_BYTES`].
    #[serde(rename = "Notification", default, skip_serializing_if = "Option::is_none")]
    pub notification: Option<String>,
    /// ≤ [`MAX_INTRODUCTION_BYTES`].
    #[serde(rename = "Introduction", default, skip_serializing_if = "Option::is_none")]
    pub introduction: Option<String>,
    /// ≤ [`MAX_FACE_URL_BYTES`].
    #[serde(rename = "FaceUrl", default, skip_serializing_if = "Option::is_none")]
    pub face_url: Option<String>,
    /// `"On"` or `"Off"`.
    #[serde(rename = "MuteAllMember", default, skip_serializing_if = "Option::is_none")]
    pub mute_all_member: Option<String>,
}

/// Body of `ban_group_member`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BanGroupMember {
    /// Prefix + room id.
    #[serde(rename = "GroupId")]
    pub group_id: String,
    /// Who is banned (≤ [`MAX_BAN_ACCOUNTS`]).
    #[serde(rename = "Members_Account")]
    pub members_account: Vec<String>,
    /// Seconds the ban lasts.
    #[serde(rename = "Duration")]
    pub duration: u64,
    /// Why (≤ [`MAX_DESCRIPTION_BYTES`]).
    #[serde(rename = "Description", default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Body of `unban_group_member`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnbanGroupMember {
    /// Prefix + room id.
    #[serde(rename = "GroupId")]
    pub group_id: String,
    /// Whose ban is lifted (≤ [`MAX_BAN_ACCOUNTS`]).
    #[serde(rename = "Members_Account")]
    pub members_account: Vec<String>,
}

#[cfg(test)]
#[path = "admin_wire_tests.rs"]
mod tests;
