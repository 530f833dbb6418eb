//! Which IM group operation an event's outbox row carries (SPEC §14.2): the one place that maps
//! a room's events onto Tencent's REST admin APIs — the room's group created before its first
//! message and destroyed after its close message, and moderation mirrored on the group. Both
//! drivers attach it to the event they decoded ([`Groups::attach`]); the packer then sends such
//! an event alone, with none of its room's other messages in flight beside it, so the calls
//! keep room order.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::codec;
use crate::domain::EventType;
use crate::publish::tencent::admin_wire::{
    MAX_DESCRIPTION_BYTES as IM_BAN_DESCRIPTION_BYTES, MAX_FACE_URL_BYTES as IM_FACE_URL_BYTES,
    MAX_NAME_BYTES as IM_NAME_BYTES, MAX_NOTIFICATION_BYTES as IM_NOTIFICATION_BYTES, cut,
};
use crate::publish::{AdminApi, AdminCall, Event};

/// The group operations this process makes (`tencent_im.manage_groups`, `.avchatroom_ban`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Groups {
    /// Create, destroy, mute, mute-all and info calls.
    pub manage: bool,
    /// Ban and unban calls (a paid edition's).
    pub ban: bool,
}

impl Groups {
    /// None (IM off, or `manage_groups: false`: the groups are assumed to exist).
    pub const NONE: Groups = Groups { manage: false, ban: false };

    /// Whether an event of the stored type `event_type` goes to IM: as a message
    /// ([`codec::reaches_im`]), or as its group's creation (the one type that is no message but
    /// carries a call). What a replay reports of an event's delivery.
    pub fn reaches_im(&self, event_type: &str) -> bool {
        codec::reaches_im(event_type) || (self.manage && event_type == EventType::RoomCreated.as_str())
    }

    /// Attaches to `event` the call its row carries, if any.
    pub fn attach(&self, event: &mut Event) {
        if !self.manage {
            return;
        }
        let Ok(event_type) = event.event_type.parse::<EventType>() else { return };
        if !matches!(
            event_type,
            EventType::RoomCreated
                | EventType::RoomClosed
                | EventType::RoomUserMuted
                | EventType::RoomUserUnmuted
                | EventType::RoomMuteAllChanged
                | EventType::RoomInfoChanged
                | EventType::RoomUserKicked
                | EventType::RoomUserUnbanned
        ) {
            return;
        }
        let payload = serde_json::from_str::<Value>(&event.body)
            .ok()
            .and_then(|mut envelope| envelope.get_mut("payload").map(Value::take))
            .unwrap_or(Value::Null);
        event.admin = self.call_for(event_type, &payload).map(Arc::new);
    }

    /// The call an event of `event_type` with `payload` makes, if any.
    pub fn call_for(&self, event_type: EventType, payload: &Value) -> Option<AdminCall> {
        let text = |field: &str| payload.get(field).and_then(Value::as_str);
        let members = || json!([text("user_id").unwrap_or_default()]);
        let (api, fields, until_ms) = match event_type {
            EventType::RoomCreated => {
                let name = cut(text("title").unwrap_or_default(), IM_NAME_BYTES);
                let created =
                    call(AdminApi::CreateGroup, json!({"Type": "AVChatRoom", "Name": name}), None, false);
                // Creations are admitted fairly between owners (docs/DESIGN.md).
                return Some(AdminCall {
                    share: Some(text("owner_id").unwrap_or_default().to_owned()),
                    ..created
                });
            }
            EventType::RoomClosed => (AdminApi::DestroyGroup, json!({}), None),
            EventType::RoomUserMuted => {
                (AdminApi::ForbidSendMsg, json!({"Members_Account": members()}), until(payload))
            }
            EventType::RoomUserUnmuted => {
                (AdminApi::ForbidSendMsg, json!({"Members_Account": members(), "MuteTime": 0}), None)
            }
            EventType::RoomMuteAllChanged => {
                let on = payload.get("muted").and_then(Value::as_bool).unwrap_or(false);
                (AdminApi::ModifyGroupBaseInfo, json!({"MuteAllMember": if on { "On" } else { "Off" }}), None)
            }
            EventType::RoomInfoChanged => {
                (AdminApi::ModifyGroupBaseInfo, Value::Object(info(payload)?), None)
            }
            EventType::RoomUserKicked if self.ban => {
                let until_ms = until(payload)?;
                let description = cut(text("reason").unwrap_or_default(), IM_BAN_DESCRIPTION_BYTES);
                let fields = json!({"Members_Account": members(), "Description": description});
                (AdminApi::BanGroupMember, fields, Some(until_ms))
            }
            EventType::RoomUserUnbanned if self.ban => {
                (AdminApi::UnbanGroupMember, json!({"Members_Account": members()}), None)
            }
            _ => return None,
        };
        Some(call(api, fields, until_ms, true))
    }
}

fn call(api: AdminApi, fields: Value, until_ms: Option<i64>, after_message: bool) -> AdminCall {
    let fields = match fields {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    AdminCall { api, fields, until_ms, after_message, share: None }
}

fn until(payload: &Value) -> Option<i64> {
    payload.get("until_ms").and_then(Value::as_i64)
}

/// A `RoomInfoChanged`'s fields as the group keeps them, cut to Tencent's limits; `None` when
/// none of them is the group's.
fn info(payload: &Value) -> Option<Map<String, Value>> {
    let mut fields = Map::new();
    for (field, im_field, limit) in [
        ("title", "Name", IM_NAME_BYTES),
        ("announcement", "Notification", IM_NOTIFICATION_BYTES),
        ("cover_url", "FaceUrl", IM_FACE_URL_BYTES),
    ] {
        if let Some(value) = payload.get(field).and_then(Value::as_str) {
            fields.insert(im_field.to_owned(), json!(cut(value, limit)));
        }
    }
    (!fields.is_empty()).then_some(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ON: Groups = Groups { manage: true, ban: false };

    #[test]
    fn a_chinese_title_is_cut_within_the_name_limit_at_a_character_boundary() {
        let title = "直播间".repeat(20);
        let created = ON.call_for(EventType::RoomCreated, &json!({"title": title})).unwrap();
        let name = created.fields["Name"].as_str().unwrap();
        assert_eq!(name.len(), 30, "ten three-byte characters");
        assert!(title.starts_with(name));
    }

    #[test]
    fn creation_is_the_call_alone_and_the_close_destroys_after_its_message() {
        let created = ON.call_for(EventType::RoomCreated, &json!({"title": "Live"})).unwrap();
        assert_eq!((created.api, created.after_message), (AdminApi::CreateGroup, false));
        assert_eq!(created.fields["Type"], "AVChatRoom");
        let owned =
            ON.call_for(EventType::RoomCreated, &json!({"title": "Live", "owner_id": "alice"})).unwrap();
        assert_eq!(owned.share.as_deref(), Some("alice"), "a creation takes its owner's share");
        let closed = ON.call_for(EventType::RoomClosed, &json!({})).unwrap();
        assert_eq!((closed.api, closed.after_message), (AdminApi::DestroyGroup, true));
        assert_eq!(ON.call_for(EventType::RoomGiftSent, &json!({})), None);
    }

    #[test]
    fn a_mute_carries_its_end_and_an_unmute_lifts_it() {
        let muted =
            ON.call_for(EventType::RoomUserMuted, &json!({"user_id": "bob", "until_ms": 99})).unwrap();
        assert_eq!((muted.api, muted.until_ms), (AdminApi::ForbidSendMsg, Some(99)));
        assert_eq!(muted.fields["Members_Account"], json!(["bob"]));
        let unmuted = ON.call_for(EventType::RoomUserUnmuted, &json!({"user_id": "bob"})).unwrap();
        assert_eq!((unmuted.fields["MuteTime"].as_i64(), unmuted.until_ms), (Some(0), None));
    }

    #[test]
    fn kicks_ban_only_with_the_paid_switch_and_a_ban() {
        let kicked = json!({"user_id": "bob", "until_ms": 5, "reason": "spam"});
        assert_eq!(ON.call_for(EventType::RoomUserKicked, &kicked), None);
        let paid = Groups { manage: true, ban: true };
        assert_eq!(paid.call_for(EventType::RoomUserKicked, &kicked).unwrap().api, AdminApi::BanGroupMember);
        let removed = json!({"user_id": "bob", "until_ms": null, "reason": ""});
        assert_eq!(paid.call_for(EventType::RoomUserKicked, &removed), None, "no ban: nothing to call");
        assert!(paid.call_for(EventType::RoomUserUnbanned, &json!({"user_id": "bob"})).is_some());
    }

    #[test]
    fn info_is_cut_to_the_groups_limits() {
        let long = "x".repeat(500);
        let call = ON
            .call_for(EventType::RoomInfoChanged, &json!({"title": long, "announcement": long, "by": "o"}))
            .unwrap();
        assert_eq!(call.fields["Name"].as_str().unwrap().len(), IM_NAME_BYTES);
        assert_eq!(call.fields["Notification"].as_str().unwrap().len(), IM_NOTIFICATION_BYTES);
        assert!(call.fields.get("FaceUrl").is_none());
    }
}
