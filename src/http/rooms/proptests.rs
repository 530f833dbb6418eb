//! Property tests of the request bodies, decoded as the [`Json`](super::Json) extractor does
//! (through [`ObjectOnly`]): an arbitrary JSON value decodes into a body exactly when an
//! independent oracle says it should (an object, every field present with a value of its rule,
//! no other field), and then into exactly those values.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::{CloseBody, CreateRoomBody, GiftBody, HeartbeatBody, MemberBody};
use crate::http::extract::ObjectOnly;
use crate::strategies::{any_json, any_string};

/// What a field accepts.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// A room, user or gift id: 1–64 of `[A-Za-z0-9_.-]`.
    Name,
    /// A command id: 1–128 printable ASCII.
    CommandId,
    /// Any string (the domain checks titles).
    Text,
    /// An integer from 0 to `u32::MAX` (the domain checks the range).
    U32,
}

/// The fields of `POST /v1/rooms`.
const CREATE: &[(&str, Kind)] = &[
    ("command_id", Kind::CommandId),
    ("room_id", Kind::Name),
    ("owner_id", Kind::Name),
    ("title", Kind::Text),
];
/// The fields of `join` and `leave`.
const MEMBER: &[(&str, Kind)] = &[("command_id", Kind::CommandId), ("user_id", Kind::Name)];
/// The fields of `gifts`.
const GIFT: &[(&str, Kind)] = &[
    ("command_id", Kind::CommandId),
    ("sender_id", Kind::Name),
    ("receiver_id", Kind::Name),
    ("gift_id", Kind::Name),
    ("count", Kind::U32),
    ("unit_value", Kind::U32),
];
/// The fields of `close`.
const CLOSE: &[(&str, Kind)] = &[("command_id", Kind::CommandId)];
/// The fields of `heartbeat`.
const HEARTBEAT: &[(&str, Kind)] = &[("user_id", Kind::Name)];

/// Whether `value` is acceptable for a field of `kind`, written from the API documentation.
fn acceptable(kind: Kind, value: &Value) -> bool {
    match (kind, value) {
        (Kind::Name, Value::String(s)) => {
            (1..=64).contains(&s.chars().count())
                && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        }
        (Kind::CommandId, Value::String(s)) => {
            (1..=128).contains(&s.chars().count()) && s.chars().all(|c| (' '..='~').contains(&c))
        }
        (Kind::Text, Value::String(_)) => true,
        (Kind::U32, Value::Number(n)) => n.as_u64().is_some_and(|n| n <= u64::from(u32::MAX)),
        _ => false,
    }
}

/// A body decodes iff every field is present and acceptable and no other key is there.
fn should_decode(fields: &[(&str, Kind)], object: &Map<String, Value>) -> bool {
    object.keys().all(|k| fields.iter().any(|(name, _)| name == k))
        && fields.iter().all(|(name, kind)| object.get(*name).is_some_and(|v| acceptable(*kind, v)))
}

/// The decoded fields of a body, as JSON, to compare with what was sent.
trait Fields: DeserializeOwned + std::fmt::Debug {
    /// Field name and value.
    fn fields(&self) -> Vec<(&'static str, Value)>;
}

impl Fields for CreateRoomBody {
    fn fields(&self) -> Vec<(&'static str, Value)> {
        vec![
            ("command_id", json!(self.command_id)),
            ("room_id", json!(self.room_id)),
            ("owner_id", json!(self.owner_id)),
            ("title", json!(self.title)),
        ]
    }
}

impl Fields for MemberBody {
    fn fields(&self) -> Vec<(&'static str, Value)> {
        vec![("command_id", json!(self.command_id)), ("user_id", json!(self.user_id))]
    }
}

impl Fields for GiftBody {
    fn fields(&self) -> Vec<(&'static str, Value)> {
        vec![
            ("command_id", json!(self.command_id)),
            ("sender_id", json!(self.sender_id)),
            ("receiver_id", json!(self.receiver_id)),
            ("gift_id", json!(self.gift_id)),
            ("count", json!(self.count)),
            ("unit_value", json!(self.unit_value)),
        ]
    }
}

impl Fields for CloseBody {
    fn fields(&self) -> Vec<(&'static str, Value)> {
        vec![("command_id", json!(self.command_id))]
    }
}

impl Fields for HeartbeatBody {
    fn fields(&self) -> Vec<(&'static str, Value)> {
        vec![("user_id", json!(self.user_id))]
    }
}

/// Decodes `value` as the extractor does, from the value and from its text.
fn decode<T: Fields>(value: &Value) -> (Result<T, serde_json::Error>, Result<T, serde_json::Error>) {
    let from_value = serde_json::from_value::<ObjectOnly<T>>(value.clone()).map(|o| o.0);
    let from_text = serde_json::from_str::<ObjectOnly<T>>(&value.to_string()).map(|o| o.0);
    (from_value, from_text)
}

/// Whether `value` is refused as a `T`, from the value and from its text.
fn refused<T: Fields>(value: &Value) -> bool {
    let (from_value, from_text) = decode::<T>(value);
    from_value.is_err() && from_text.is_err()
}

/// Decodes `object` as `T` from the value and from its text; both agree with the oracle and,
/// when they succeed, give back exactly the values sent.
fn check<T: Fields>(fields: &[(&str, Kind)], object: &Map<String, Value>) -> Result<(), TestCaseError> {
    let want = should_decode(fields, object);
    let text = Value::Object(object.clone()).to_string();
    let (from_value, from_text) = decode::<T>(&Value::Object(object.clone()));
    prop_assert_eq!(from_value.is_ok(), want, "from_value({}) = {:?}", text, from_value);
    prop_assert_eq!(from_text.is_ok(), want, "from_str({}) = {:?}", text, from_text);
    if let (Ok(a), Ok(b)) = (from_value, from_text) {
        prop_assert_eq!(a.fields(), b.fields());
        for (name, value) in a.fields() {
            prop_assert_eq!(Some(&value), object.get(name), "{} decoded differently", name);
        }
    }
    Ok(())
}

/// A value that a field of `kind` often accepts, or anything at all.
fn field_value(kind: Kind) -> BoxedStrategy<Value> {
    let plausible: BoxedStrategy<Value> = match kind {
        Kind::Name => any_string().prop_map(Value::from).boxed(),
        Kind::CommandId => "[ -~]{1,130}".prop_map(Value::from).boxed(),
        Kind::Text => any::<String>().prop_map(Value::from).boxed(),
        Kind::U32 => prop_oneof![
            any::<u32>().prop_map(Value::from),
            prop_oneof![Just(0u64), Just(u64::from(u32::MAX) + 1), Just(u64::MAX)].prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
        ]
        .boxed(),
    };
    prop_oneof![4 => plausible, 1 => any_json()].boxed()
}

/// An object with the fields of a body, each sometimes missing, and sometimes one more key
/// (which may also overwrite a known field).
fn body(fields: &'static [(&'static str, Kind)]) -> impl Strategy<Value = Map<String, Value>> {
    let values: Vec<_> = fields
        .iter()
        .map(|(name, kind)| proptest::option::weighted(0.9, field_value(*kind)).prop_map(move |v| (*name, v)))
        .collect();
    let extra = proptest::option::weighted(0.15, (prop_oneof!["[a-z_]{1,12}", "command_id"], any_json()));
    (values, extra).prop_map(|(values, extra)| {
        let mut object: Map<String, Value> =
            values.into_iter().filter_map(|(name, v)| v.map(|v| (name.to_owned(), v))).collect();
        if let Some((key, value)) = extra {
            object.insert(key, value);
        }
        object
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// `POST /v1/rooms` bodies.
    #[test]
    fn create_bodies_decode_exactly_when_valid(object in body(CREATE)) {
        check::<CreateRoomBody>(CREATE, &object)?;
    }

    /// `join` and `leave` bodies.
    #[test]
    fn member_bodies_decode_exactly_when_valid(object in body(MEMBER)) {
        check::<MemberBody>(MEMBER, &object)?;
    }

    /// `gifts` bodies.
    #[test]
    fn gift_bodies_decode_exactly_when_valid(object in body(GIFT)) {
        check::<GiftBody>(GIFT, &object)?;
    }

    /// `close` and `heartbeat` bodies.
    #[test]
    fn close_and_heartbeat_bodies_decode_exactly_when_valid(close in body(CLOSE), beat in body(HEARTBEAT)) {
        check::<CloseBody>(CLOSE, &close)?;
        check::<HeartbeatBody>(HEARTBEAT, &beat)?;
    }

    /// A positional array of the fields (which serde's derived structs take) is refused.
    #[test]
    fn positional_arrays_are_refused(
        create in body(CREATE), member in body(MEMBER), gift in body(GIFT), close in body(CLOSE),
    ) {
        let array = |object: Map<String, Value>| Value::Array(object.into_iter().map(|(_, v)| v).collect());
        prop_assert!(refused::<CreateRoomBody>(&array(create)));
        prop_assert!(refused::<MemberBody>(&array(member)));
        prop_assert!(refused::<GiftBody>(&array(gift)));
        prop_assert!(refused::<CloseBody>(&array(close)));
    }

    /// Any value that is not an object is refused by every body, any object is decoded by the
    /// oracle of each; nothing panics.
    #[test]
    fn any_json_decodes_only_by_the_oracle(value in any_json()) {
        let Value::Object(object) = &value else {
            prop_assert!(refused::<CreateRoomBody>(&value), "{}", value);
            prop_assert!(refused::<MemberBody>(&value), "{}", value);
            prop_assert!(refused::<GiftBody>(&value), "{}", value);
            prop_assert!(refused::<CloseBody>(&value), "{}", value);
            prop_assert!(refused::<HeartbeatBody>(&value), "{}", value);
            return Ok(());
        };
        check::<CreateRoomBody>(CREATE, object)?;
        check::<MemberBody>(MEMBER, object)?;
        check::<GiftBody>(GIFT, object)?;
        check::<CloseBody>(CLOSE, object)?;
        check::<HeartbeatBody>(HEARTBEAT, object)?;
    }
}
