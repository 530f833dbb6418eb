//! `POST /v4/group_open_http_svc/send_group_msg` of the fake: past the [`gate`] (a queued
//! fault, usersig, the API's call limit), checks what Tencent checks, in Tencent's order — the
//! body (10004/10015; 80002 when the content of its elements passes 12 KB), the group
//! (10010 in `require_groups` mode, unless it exists), the content (80001) — then dedups,
//! applies the per-group limit (OK with `MsgDropReason`) and records every custom element (one
//! message may carry many: SPEC §12.1). Every limit counts calls, whatever a call carries.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::Extensions;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::gate::{self, Refusal, refuse};
use super::groups::JournalEntry;
use super::state::FakeState;
use room_service::delivery::pack::TENCENT_MAX_CONTENT_BYTES;
use room_service::publish::tencent::usersig;
use room_service::publish::tencent::wire::{Answer, CloudCustomData, MAX_BODY_BYTES};

/// Longest custom `GroupId` Tencent accepts, in bytes.
use room_service::publish::tencent::wire::MAX_GROUP_ID_BYTES;

/// A message whose content passes 12 KB.
const TOO_LARGE: Refusal = (80002, "message too long");

/// A message that passed validation, about to be deduped, rate-limited and recorded.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    pub(crate) group: String,
    pub(crate) random: u32,
    /// Its custom elements, in order.
    pub(crate) elements: Vec<Element>,
    pub(crate) priority: Option<String>,
}

/// One custom element of a [`Candidate`].
#[derive(Clone, Debug)]
pub(crate) struct Element {
    pub(crate) event_id: Option<String>,
    pub(crate) data: String,
    pub(crate) desc: String,
}

/// What happened to a [`Candidate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Recorded with this sequence number.
    Recorded { msg_seq: u64 },
    /// A repeat; the original sequence number.
    Duplicate { msg_seq: u64 },
    /// Over the per-group limit.
    Dropped,
}

/// The handler.
pub(crate) async fn send_group_msg(
    State(state): State<Arc<FakeState>>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
    extensions: Extensions,
    body: Bytes,
) -> Response {
    let entry = JournalEntry::of("send_group_msg", &body, event_ids_of(&body));
    let entered = match gate::enter(&state, entry, "send_group_msg", query, &extensions).await {
        Ok(entered) => entered,
        Err(answer) => return answer,
    };
    let candidate = match validate(&body) {
        Ok(c) => c,
        Err(refusal) => {
            if refusal == TOO_LARGE {
                state.count_too_large();
            }
            return refuse(&state, refusal);
        }
    };
    if state.require_groups() && !state.group_exists(&candidate.group) {
        return refuse(&state, (10010, "group does not exist or has been dissolved"));
    }
    if state.is_sensitive(&candidate.elements) {
        // The whole message is refused for what one element says, as Tencent's moderation does.
        return refuse(&state, (80001, "message content contains sensitive words"));
    }
    let msg_time = usersig::system_now_secs();
    let answer = match state.admit(entered.now, msg_time, candidate) {
        Admission::Recorded { msg_seq } | Admission::Duplicate { msg_seq } => Answer::ok(msg_time, msg_seq),
        Admission::Dropped => {
            Answer { msg_drop_reason: Some("MsgFreqCtrl".into()), ..Answer::ok(msg_time, 0) }
        }
    };
    if let Some(delay) = entered.answer_after {
        tokio::time::sleep(delay).await;
    }
    Json(answer).into_response()
}

/// The event ids a call carries in its `CloudCustomData`, read before anything else is
/// checked, so that faulted and refused calls count as sends of their events too.
fn event_ids_of(body: &[u8]) -> Vec<String> {
    let custom = serde_json::from_slice::<Value>(body).ok().and_then(|doc| {
        let custom = doc.get("CloudCustomData")?.as_str()?;
        serde_json::from_str::<CloudCustomData>(custom).ok()
    });
    custom.map(CloudCustomData::ids).unwrap_or_default()
}

/// Checks the body like Tencent and extracts what is recorded.
pub(crate) fn validate(body: &[u8]) -> Result<Candidate, Refusal> {
    if body.len() > MAX_BODY_BYTES {
        return Err(TOO_LARGE);
    }
    let doc: Value = serde_json::from_slice(body).map_err(|_| (10004, "body is not json"))?;
    let group = doc.get("GroupId").and_then(Value::as_str).ok_or((10004, "GroupId missing"))?;
    let group_ok =
        !group.is_empty() && group.len() <= MAX_GROUP_ID_BYTES && group.bytes().all(|b| b.is_ascii_graphic());
    if !group_ok {
        return Err((10015, "invalid GroupId"));
    }
    let random = doc
        .get("Random")
        .and_then(Value::as_u64)
        .and_then(|r| u32::try_from(r).ok())
        .ok_or((10004, "Random missing or not a u32"))?;
    let elems = doc
        .get("MsgBody")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
        .ok_or((10004, "MsgBody missing"))?;
    let mut customs = Vec::new();
    let mut content_bytes = 0;
    for elem in elems {
        let kind = elem.get("MsgType").and_then(Value::as_str);
        let content = elem.get("MsgContent").filter(|c| c.is_object());
        let (Some(kind), Some(content)) = (kind, content) else {
            return Err((10004, "bad MsgBody element"));
        };
        if kind == "TIMCustomElem" {
            let data =
                content.get("Data").and_then(Value::as_str).ok_or((10004, "TIMCustomElem without Data"))?;
            let desc = content.get("Desc").and_then(Value::as_str).unwrap_or("");
            content_bytes += data.len() + desc.len();
            customs.push((data.to_owned(), desc.to_owned()));
        }
    }
    if content_bytes > TENCENT_MAX_CONTENT_BYTES {
        return Err(TOO_LARGE);
    }
    let event_ids = match doc.get("CloudCustomData") {
        None => Vec::new(),
        Some(Value::String(s)) => {
            serde_json::from_str::<CloudCustomData>(s).map(CloudCustomData::ids).unwrap_or_default()
        }
        Some(_) => return Err((10004, "CloudCustomData is not a string")),
    };
    let mut event_ids = event_ids.into_iter();
    let elements =
        customs.into_iter().map(|(data, desc)| Element { event_id: event_ids.next(), data, desc }).collect();
    let priority = match doc.get("MsgPriority") {
        None => None,
        Some(Value::String(p)) if ["High", "Normal", "Low", "Lowest"].contains(&p.as_str()) => {
            Some(p.clone())
        }
        Some(_) => return Err((10004, "bad MsgPriority")),
    };
    Ok(Candidate { group: group.to_owned(), random, elements, priority })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(v: Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    fn good() -> Value {
        serde_json::json!({
            "GroupId": "live_r1", "Random": 42,
            "MsgBody": [{"MsgType": "TIMCustomElem", "MsgContent": {"Data": "{}", "Desc": "T"}}],
            "CloudCustomData": "{\"event_id\":\"e1\"}", "MsgPriority": "High",
        })
    }

    #[test]
    fn a_good_body_is_extracted() {
        let c = validate(&body(good())).unwrap();
        assert_eq!((c.group.as_str(), c.random), ("live_r1", 42));
        let [element] = c.elements.as_slice() else { panic!("one element: {:?}", c.elements) };
        assert_eq!(element.event_id.as_deref(), Some("e1"));
        assert_eq!((element.data.as_str(), element.desc.as_str()), ("{}", "T"));
        assert_eq!(c.priority.as_deref(), Some("High"));
    }

    #[test]
    fn bad_bodies_get_tencent_codes() {
        let code = |v: &[u8]| validate(v).err().map(|(c, _)| c);
        let with = |k: &str, val: Value| {
            let mut v = good();
            v[k] = val;
            body(v)
        };
        let without = |k: &str| {
            let mut v = good();
            v.as_object_mut().unwrap().remove(k);
            body(v)
        };
        assert_eq!(code(b"nope"), Some(10004));
        assert_eq!(code(&without("GroupId")), Some(10004));
        assert_eq!(code(&with("GroupId", "".into())), Some(10015));
        assert_eq!(code(&with("GroupId", "x".repeat(49).into())), Some(10015));
        assert_eq!(code(&with("GroupId", "a b".into())), Some(10015));
        assert_eq!(code(&without("Random")), Some(10004));
        assert_eq!(code(&with("Random", (1u64 << 32).into())), Some(10004));
        assert_eq!(code(&with("MsgBody", serde_json::json!([]))), Some(10004));
        assert_eq!(code(&with("MsgBody", serde_json::json!([{"MsgType": 1}]))), Some(10004));
        assert_eq!(code(&with("MsgPriority", "Urgent".into())), Some(10004));
        let mut big = good();
        big["MsgBody"][0]["MsgContent"]["Data"] = "x".repeat(MAX_BODY_BYTES).into();
        assert_eq!(code(&body(big)), Some(80002));
    }
}
