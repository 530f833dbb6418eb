//! `SetAttributes` (SPEC §14.2): a room's key–value attributes, each with the room version that
//! last wrote it, written all or nothing and, with `expect`, only if every key named is still at
//! the version the caller read.

use serde_json::json;

use super::{Draft, event};
use crate::domain::command::{Actor, AttributeWrite};
use crate::domain::error::DomainError;
use crate::domain::event::{Event, EventType};
use crate::domain::state::Attribute;

use super::moderation::Role;

/// Most attributes a room holds.
pub const MAX_ATTRIBUTES: usize = 32;
/// Longest key, in bytes (a key is of characters JSON never escapes).
pub const MAX_ATTRIBUTE_KEY_BYTES: usize = 64;
/// Longest value, in bytes as JSON writes it out (`json_escaped_len`).
pub const MAX_ATTRIBUTE_VALUE_BYTES: usize = 2 * 1024;
/// Most bytes of all of a room's values together, as JSON writes them out.
pub const MAX_ATTRIBUTE_TOTAL_BYTES: usize = 16 * 1024;
/// Most bytes of the values one `RoomAttributesChanged` carries: above it the event names the
/// keys and their versions only (`values_omitted: true`) and clients read the room, so no write
/// can outgrow an IM message's byte budget.
pub const EVENT_ATTRIBUTE_VALUES_BYTES: usize = 1024;

impl Draft {
    /// Applies `write`; `None` when it changes nothing.
    pub(super) fn set_attributes(
        &mut self,
        by: &Actor,
        write: &AttributeWrite,
    ) -> Result<Option<Vec<Event>>, DomainError> {
        check_write(write)?;
        self.require(by, Role::Admin)?;
        let attributes = &mut self.state.attributes;
        for (key, expected) in &write.expect {
            let version = attributes.get(key).map_or(0, |a| a.version);
            if version != *expected {
                return Err(DomainError::AttributeConflict { key: key.clone(), version });
            }
        }
        let version = self.state.version;
        let attributes = &mut self.state.attributes;
        let mut deleted = Vec::new();
        for key in &write.delete {
            if attributes.remove(key).is_some() {
                deleted.push(key.clone());
                self.changes.push(super::Change::AttributeDeleted { key: key.clone() });
            }
        }
        let mut set = serde_json::Map::new();
        for (key, value) in &write.set {
            if attributes.get(key).is_some_and(|a| a.value == *value) {
                continue;
            }
            let attribute = Attribute { value: value.clone(), version };
            attributes.insert(key.clone(), attribute.clone());
            self.changes.push(super::Change::AttributeSet { key: key.clone(), attribute });
            set.insert(key.clone(), json!(value));
        }
        check_room(attributes.values().map(|a| json_escaped_len(&a.value)), attributes.len())?;
        if set.is_empty() && deleted.is_empty() {
            return Ok(None);
        }
        let versions: serde_json::Map<_, _> = set.keys().map(|k| (k.clone(), json!(version))).collect();
        let values_bytes: usize = set.iter().map(|(k, v)| k.len() + v.to_string().len()).sum();
        let payload = if values_bytes <= EVENT_ATTRIBUTE_VALUES_BYTES {
            json!({"set": set, "deleted": deleted, "versions": versions, "by": by})
        } else {
            json!({"set": {}, "deleted": deleted, "versions": versions, "values_omitted": true, "by": by})
        };
        Ok(Some(vec![event(EventType::RoomAttributesChanged, payload)]))
    }
}

fn invalid(field: &'static str, reason: impl Into<String>) -> DomainError {
    DomainError::InvalidArgument { field, reason: reason.into() }
}

fn check_write(write: &AttributeWrite) -> Result<(), DomainError> {
    if write.set.is_empty() && write.delete.is_empty() {
        return Err(invalid("set", "give at least one key to set or delete"));
    }
    if write.set.len() + write.delete.len() > MAX_ATTRIBUTES || write.expect.len() > MAX_ATTRIBUTES {
        return Err(invalid(
            "set",
            format!(
                "a write sets and deletes at most {MAX_ATTRIBUTES} keys together, and expects at most {MAX_ATTRIBUTES}"
            ),
        ));
    }
    for key in write.set.keys().chain(&write.delete).chain(write.expect.keys()) {
        check_key(key)?;
    }
    if let Some(both) = write.delete.iter().find(|k| write.set.contains_key(*k)) {
        return Err(invalid("delete", format!("{both:?} is also in set")));
    }
    if let Some((key, _)) = write.set.iter().find(|(_, v)| json_escaped_len(v) > MAX_ATTRIBUTE_VALUE_BYTES) {
        return Err(invalid(
            "set",
            format!("the value of {key:?} is over {MAX_ATTRIBUTE_VALUE_BYTES} bytes as JSON escapes it"),
        ));
    }
    Ok(())
}

fn check_key(key: &str) -> Result<(), DomainError> {
    let ok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-');
    if key.is_empty() || key.len() > MAX_ATTRIBUTE_KEY_BYTES || !key.bytes().all(ok) {
        return Err(invalid(
            "set",
            format!("a key must be 1–{MAX_ATTRIBUTE_KEY_BYTES} bytes of [A-Za-z0-9_.:-]"),
        ));
    }
    Ok(())
}

fn check_room(values: impl Iterator<Item = usize>, keys: usize) -> Result<(), DomainError> {
    if keys > MAX_ATTRIBUTES {
        return Err(invalid("set", format!("a room holds at most {MAX_ATTRIBUTES} attributes")));
    }
    if values.sum::<usize>() > MAX_ATTRIBUTE_TOTAL_BYTES {
        return Err(invalid(
            "set",
            format!(
                "a room's values hold at most {MAX_ATTRIBUTE_TOTAL_BYTES} bytes together as JSON escapes them"
            ),
        ));
    }
    Ok(())
}

/// The bytes `value` takes as a JSON string, without its quotes, as `serde_json` writes it: a
/// quote, a backslash and `\b \f \n \r \t` take 2, any other control character below
/// U+0020 takes 6 (`\u0000`), every other character its UTF-8 bytes. The limits count this, so
/// they hold on the wire (a value of control characters is six times its length there).
pub fn json_escaped_len(value: &str) -> usize {
    value
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | 0x08 | 0x0c | b'\n' | b'\r' | b'\t' => 2,
            0x00..=0x1f => 6,
            _ => 1,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::json_escaped_len;

    #[test]
    fn the_escaped_length_is_what_serde_json_writes() {
        let mut samples: Vec<String> = (0u8..=0x7f).map(|b| char::from(b).to_string()).collect();
        samples.extend(["é", "語", "😀", "\u{2028}", "a\"b\\c\u{0}\u{1f}\n", ""].map(String::from));
        samples.push((0u8..=0x7f).map(char::from).collect());
        for sample in samples {
            let written = serde_json::to_string(&sample).unwrap().len() - 2;
            assert_eq!(json_escaped_len(&sample), written, "{sample:?}");
        }
        assert_eq!(json_escaped_len(&"\u{1}".repeat(10)), 60);
    }
}
