//! What the fake IM remembers of the group admin APIs (SPEC §14.2): each group's state, the
//! journal of every call that reached it (messages too, in arrival order), each admin API's
//! rate window, and the `require_groups` mode in which a message to a group that does not
//! exist is refused with 10010. [`FakeState`]'s methods here inspect and steer it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::time::Instant;

use super::state::FakeState;

/// Journal entries kept; the oldest go first.
const JOURNAL_LEN: usize = 100_000;

/// One group the fake was asked to create, as the admin APIs left it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupState {
    /// Created and not destroyed since: messages and admin calls reach it.
    pub exists: bool,
    /// Destroyed (and not created again since).
    pub destroyed: bool,
    /// How many times `create_group` created it.
    pub created: u32,
    /// `Type` it was created with.
    pub group_type: String,
    /// `Name`, from its creation or the last `modify_group_base_info` naming it.
    pub name: Option<String>,
    /// `Notification` (the room's announcement).
    pub notification: Option<String>,
    /// `Introduction`.
    pub introduction: Option<String>,
    /// `FaceUrl` (the room's cover).
    pub face_url: Option<String>,
    /// `MuteAllMember` is `On`.
    pub mute_all: bool,
    /// Muted accounts and when their mute ends (Unix seconds); `MuteTime` 0 removes one.
    pub muted: BTreeMap<String, u64>,
    /// Banned accounts and when their ban ends (Unix seconds).
    pub banned: BTreeMap<String, u64>,
}

/// One call that reached the fake, whatever its answer (faults and refusals included).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalEntry {
    /// `send_group_msg` or the admin API's name (`create_group`, ...).
    pub api: String,
    /// The body's `GroupId`, when it had one.
    pub group: Option<String>,
    /// For a message: the event ids of its `CloudCustomData`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub event_ids: Vec<String>,
    /// For an admin call: its body as sent, when it was JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
}

impl JournalEntry {
    /// The entry of a call of `api` with `body`; a message's keeps its `event_ids`, an admin
    /// call's its body.
    pub(crate) fn of(api: &str, body: &[u8], event_ids: Vec<String>) -> Self {
        let doc = serde_json::from_slice::<Value>(body).ok();
        let group = doc.as_ref().and_then(|d| d.get("GroupId")).and_then(Value::as_str).map(str::to_owned);
        let body = if api == "send_group_msg" { None } else { doc };
        Self { api: api.to_owned(), group, event_ids, body }
    }
}

/// The admin side of the fake's state, behind its own mutex.
#[derive(Debug, Default)]
pub(crate) struct AdminBook {
    /// Every group ever created, by `GroupId`.
    pub(crate) groups: BTreeMap<String, GroupState>,
    journal: VecDeque<JournalEntry>,
    /// Each admin API's sliding one-second window of calls.
    pub(crate) windows: HashMap<&'static str, VecDeque<Instant>>,
}

impl AdminBook {
    /// Forgets the journal and the rate windows; keeps the groups.
    pub(crate) fn forget_records(&mut self) {
        self.journal.clear();
        self.windows.clear();
    }

    /// The live group `group_id`, or 10010 like Tencent.
    pub(crate) fn live(&mut self, group_id: &str) -> Result<&mut GroupState, (i64, &'static str)> {
        match self.groups.get_mut(group_id) {
            Some(group) if group.exists => Ok(group),
            _ => Err((10010, "group does not exist or has been dissolved")),
        }
    }

    /// How many groups exist now (what the AVChatRoom quota counts).
    pub(crate) fn live_count(&self) -> usize {
        self.groups.values().filter(|g| g.exists).count()
    }
}

impl FakeState {
    /// Appends `entry` to the journal.
    pub(crate) fn journal_call(&self, entry: JournalEntry) {
        let mut book = self.admin_book();
        if book.journal.len() == JOURNAL_LEN {
            book.journal.pop_front();
        }
        book.journal.push_back(entry);
    }

    /// Every call that reached the fake since start or the last [`FakeState::clear`], in
    /// arrival order: messages and admin calls, whatever their answers.
    pub fn journal(&self) -> Vec<JournalEntry> {
        self.admin_book().journal.iter().cloned().collect()
    }

    /// The journal's calls on one `GroupId` (prefix included).
    pub fn journal_of(&self, group: &str) -> Vec<JournalEntry> {
        let book = self.admin_book();
        book.journal.iter().filter(|e| e.group.as_deref() == Some(group)).cloned().collect()
    }

    /// Every group ever created, by `GroupId`.
    pub fn groups(&self) -> BTreeMap<String, GroupState> {
        self.admin_book().groups.clone()
    }

    /// One group's state, if it was ever created.
    pub fn group(&self, group_id: &str) -> Option<GroupState> {
        self.admin_book().groups.get(group_id).cloned()
    }

    /// True when the group exists now (created, not destroyed).
    pub fn group_exists(&self, group_id: &str) -> bool {
        self.admin_book().groups.get(group_id).is_some_and(|g| g.exists)
    }

    /// Creates `group_id` as an `AVChatRoom` without a call (a test's group made beforehand).
    pub fn seed_group(&self, group_id: &str) {
        let mut book = self.admin_book();
        let group = book.groups.entry(group_id.to_owned()).or_default();
        *group = GroupState {
            exists: true,
            created: group.created + 1,
            group_type: "AVChatRoom".into(),
            ..GroupState::default()
        };
    }

    /// In `require_groups` mode a message to a group that was never created, or was
    /// destroyed, is refused with 10010 (the option's value until switched).
    pub fn set_require_groups(&self, on: bool) {
        self.require_groups.store(on, Ordering::Relaxed);
    }

    /// Whether `require_groups` mode is on.
    pub fn require_groups(&self) -> bool {
        self.require_groups.load(Ordering::Relaxed)
    }
}
