//! The IM group operations a room's events carry besides a message, or instead of one (SPEC
//! §14.2): the room's group created before its first message, destroyed after its close
//! message, and the moderation a room applies mirrored on its group. An [`AdminCall`] rides on
//! the one [`Event`](super::Event) whose outbox row it belongs to, so it leaves in room order,
//! through the same stack and rate limits as the room's messages, and is retried, parked and
//! requeued with its row.

use serde_json::{Map, Value};

/// A Tencent IM REST admin API the service calls (`v4/group_open_http_svc/<name>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AdminApi {
    /// Create the room's AVChatRoom group.
    CreateGroup,
    /// Destroy it.
    DestroyGroup,
    /// Mute (or, with 0, unmute) members.
    ForbidSendMsg,
    /// Mute-all, name, notification, face URL.
    ModifyGroupBaseInfo,
    /// Ban (remove, and refuse the rejoin of) members: a paid edition's feature.
    BanGroupMember,
    /// Lift a ban.
    UnbanGroupMember,
}

impl AdminApi {
    /// Every API, in declaration order.
    pub const ALL: [AdminApi; 6] = [
        AdminApi::CreateGroup,
        AdminApi::DestroyGroup,
        AdminApi::ForbidSendMsg,
        AdminApi::ModifyGroupBaseInfo,
        AdminApi::BanGroupMember,
        AdminApi::UnbanGroupMember,
    ];

    /// The API's name: its path's last segment and a bounded label.
    pub fn as_str(self) -> &'static str {
        match self {
            AdminApi::CreateGroup => "create_group",
            AdminApi::DestroyGroup => "destroy_group",
            AdminApi::ForbidSendMsg => "forbid_send_msg",
            AdminApi::ModifyGroupBaseInfo => "modify_group_base_info",
            AdminApi::BanGroupMember => "ban_group_member",
            AdminApi::UnbanGroupMember => "unban_group_member",
        }
    }

    /// The path appended to the base URL.
    pub fn path(self) -> String {
        format!("/v4/group_open_http_svc/{}", self.as_str())
    }

    /// Tencent's answers that mean the call's work is done already: the group is taken by us
    /// (10021, 10025) for a creation; it is gone (10010, 10015) for a destruction.
    pub fn done_already(self, code: i64) -> bool {
        match self {
            AdminApi::CreateGroup => matches!(code, 10021 | 10025),
            AdminApi::DestroyGroup => matches!(code, 10010 | 10015),
            _ => false,
        }
    }
}

/// One admin call an event carries (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct AdminCall {
    /// Which API.
    pub api: AdminApi,
    /// The request's fields besides `GroupId` (the leaf adds it: prefix + room id), as sent;
    /// a mute's `MuteTime` and a ban's `Duration` are added when sent, from [`Self::until_ms`].
    pub fields: Map<String, Value>,
    /// For `forbid_send_msg` and `ban_group_member`: when the mute or ban ends (ms since the
    /// epoch). The leaf sends the seconds left then (0 once past: a mute is lifted), so a retry
    /// never lengthens it.
    pub until_ms: Option<i64>,
    /// True when the event's message goes first (`send_group_msg`), then the call; false for
    /// the call alone (a room's creation is no message).
    pub after_message: bool,
    /// Whose share of its API's budget it takes, admitted fairly between shares (a room's
    /// creation: its owner's id); `None`: the API's common limiter alone.
    pub share: Option<String>,
}
