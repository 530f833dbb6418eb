//! The group admin APIs of the fake IM (SPEC §14.2, `TENCENT_IM_ADMIN.md`), at their paths:
//! past the [`gate`] (a queued fault, usersig, the API's own call limit), each checks its body
//! like Tencent (10004) and applies it to the group's state with Tencent's answers:
//!
//! - `create_group`: `Type` `AVChatRoom`, a `GroupId` of at most 48 printable ASCII bytes not
//!   starting with `@TGS#`, a `Name` of at most 30 bytes (else 10004); 10025 when the group
//!   exists already; 10036 past the `avchatroom_quota` of live groups;
//! - `destroy_group`: 10010 when the group does not exist or was destroyed;
//! - `forbid_send_msg`: 1–500 accounts, each muted until now + `MuteTime` (0 lifts it);
//! - `modify_group_base_info`: `MuteAllMember` `On`/`Off`, and `Name`, `Notification`,
//!   `Introduction`, `FaceUrl` within the SDK's byte lengths (10004 beyond: a value not cut
//!   to fit is caught);
//! - `ban_group_member` / `unban_group_member`: 1–20 accounts; 10007 unless `ban_enabled`.
//!
//! Every API but `create_group` needs the group to exist (10010).

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::Extensions;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::de::DeserializeOwned;

use super::gate::{self, Refusal, refuse};
use super::groups::{AdminBook, GroupState, JournalEntry};
use super::state::FakeState;
use room_service::publish::AdminApi;
use room_service::publish::tencent::admin_wire::{self as aw, BanGroupMember, CreateGroup};
use room_service::publish::tencent::admin_wire::{ForbidSendMsg, ModifyGroupBaseInfo, UnbanGroupMember};
use room_service::publish::tencent::usersig;
use room_service::publish::tencent::wire::{Answer, MAX_GROUP_ID_BYTES};

/// A bad parameter.
const BAD: i64 = 10004;

/// The routes of the six admin APIs over `state`.
pub(crate) fn routes(state: Arc<FakeState>) -> Router {
    let mut router = Router::new();
    for api in AdminApi::ALL {
        let handler = move |state, query, extensions, body| handle(api, state, query, extensions, body);
        router = router.route(&api.path(), post(handler));
    }
    router.with_state(state)
}

/// One call of `api`.
async fn handle(
    api: AdminApi,
    State(state): State<Arc<FakeState>>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
    extensions: Extensions,
    body: Bytes,
) -> Response {
    let entry = JournalEntry::of(api.as_str(), &body, Vec::new());
    let entered = match gate::enter(&state, entry, api.as_str(), query, &extensions).await {
        Ok(entered) => entered,
        Err(answer) => return answer,
    };
    let applied = apply(&state, api, &body, usersig::system_now_secs());
    if let Some(delay) = entered.answer_after {
        tokio::time::sleep(delay).await;
    }
    match applied {
        Ok(()) => Json(Answer::done()).into_response(),
        Err(refusal) => refuse(&state, refusal),
    }
}

/// Checks `body` as `api`'s and applies it at `now` (Unix seconds).
pub(crate) fn apply(state: &FakeState, api: AdminApi, body: &[u8], now: u64) -> Result<(), Refusal> {
    let mut book = state.admin_book();
    let book = &mut *book;
    match api {
        AdminApi::CreateGroup => create(state, book, parse(body)?),
        AdminApi::DestroyGroup => {
            let body: aw::DestroyGroup = parse(body)?;
            book.live(&body.group_id)?.destroy();
            Ok(())
        }
        AdminApi::ForbidSendMsg => mute(book, parse(body)?, now),
        AdminApi::ModifyGroupBaseInfo => modify(book, parse(body)?),
        AdminApi::BanGroupMember | AdminApi::UnbanGroupMember if !state.options.ban_enabled => {
            Err((10007, "no permission: ban_group_member needs the Premium edition"))
        }
        AdminApi::BanGroupMember => ban(book, parse(body)?, now),
        AdminApi::UnbanGroupMember => {
            let body: UnbanGroupMember = parse(body)?;
            accounts(&body.members_account, aw::MAX_BAN_ACCOUNTS)?;
            let group = book.live(&body.group_id)?;
            for account in &body.members_account {
                group.banned.remove(account);
            }
            Ok(())
        }
    }
}

/// The body as `T`, or 10004.
fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, Refusal> {
    serde_json::from_slice(body).map_err(|_| (BAD, "body is not this API's json"))
}

/// 10004 unless `text` (when given) fits in `max` bytes.
fn fits(text: Option<&str>, max: usize, what: &'static str) -> Result<(), Refusal> {
    if text.is_some_and(|t| t.len() > max) { Err((BAD, what)) } else { Ok(()) }
}

/// 10004 unless there are 1 to `max` accounts.
fn accounts(list: &[String], max: usize) -> Result<(), Refusal> {
    if list.is_empty() || list.len() > max {
        Err((BAD, "Members_Account count out of range"))
    } else {
        Ok(())
    }
}

fn create(state: &FakeState, book: &mut AdminBook, body: CreateGroup) -> Result<(), Refusal> {
    let id = &body.group_id;
    let id_ok = !id.is_empty()
        && id.len() <= MAX_GROUP_ID_BYTES
        && id.bytes().all(|b| b.is_ascii_graphic())
        && !id.starts_with("@TGS#");
    if body.group_type != aw::AVCHATROOM || !id_ok {
        return Err((BAD, "invalid Type or GroupId"));
    }
    fits(Some(&body.name), aw::MAX_NAME_BYTES, "Name too long")?;
    if book.groups.get(id).is_some_and(|g| g.exists) {
        return Err((10025, "group id is already used by you"));
    }
    if state.options.avchatroom_quota.is_some_and(|quota| book.live_count() >= quota) {
        return Err((10036, "the number of AVChatRoom groups exceeds the app's quota"));
    }
    let group = book.groups.entry(id.clone()).or_default();
    *group = GroupState {
        exists: true,
        created: group.created + 1,
        group_type: body.group_type,
        name: Some(body.name),
        ..GroupState::default()
    };
    Ok(())
}

fn mute(book: &mut AdminBook, body: ForbidSendMsg, now: u64) -> Result<(), Refusal> {
    accounts(&body.members_account, aw::MAX_MUTE_ACCOUNTS)?;
    let group = book.live(&body.group_id)?;
    for account in body.members_account {
        if body.mute_time == 0 {
            group.muted.remove(&account);
        } else {
            group.muted.insert(account, now.saturating_add(body.mute_time));
        }
    }
    Ok(())
}

fn modify(book: &mut AdminBook, body: ModifyGroupBaseInfo) -> Result<(), Refusal> {
    fits(body.name.as_deref(), aw::MAX_NAME_BYTES, "Name too long")?;
    fits(body.notification.as_deref(), aw::MAX_NOTIFICATION_BYTES, "Notification too long")?;
    fits(body.introduction.as_deref(), aw::MAX_INTRODUCTION_BYTES, "Introduction too long")?;
    fits(body.face_url.as_deref(), aw::MAX_FACE_URL_BYTES, "FaceUrl too long")?;
    let mute_all = match body.mute_all_member.as_deref() {
        None => None,
        Some("On") => Some(true),
        Some("Off") => Some(false),
        Some(_) => return Err((BAD, "MuteAllMember must be On or Off")),
    };
    let group = book.live(&body.group_id)?;
    group.mute_all = mute_all.unwrap_or(group.mute_all);
    group.name = body.name.or(group.name.take());
    group.notification = body.notification.or(group.notification.take());
    group.introduction = body.introduction.or(group.introduction.take());
    group.face_url = body.face_url.or(group.face_url.take());
    Ok(())
}

fn ban(book: &mut AdminBook, body: BanGroupMember, now: u64) -> Result<(), Refusal> {
    accounts(&body.members_account, aw::MAX_BAN_ACCOUNTS)?;
    fits(body.description.as_deref(), aw::MAX_DESCRIPTION_BYTES, "Description too long")?;
    let group = book.live(&body.group_id)?;
    for account in body.members_account {
        group.banned.insert(account, now.saturating_add(body.duration));
    }
    Ok(())
}

impl GroupState {
    /// Destroyed: gone until created again.
    fn destroy(&mut self) {
        self.exists = false;
        self.destroyed = true;
    }
}

#[cfg(test)]
#[path = "admin_tests.rs"]
mod tests;
