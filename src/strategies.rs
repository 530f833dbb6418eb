//! Proptest strategies shared by the property tests of the id types and the request bodies.

use proptest::prelude::*;
use serde_json::Value;

/// Strings near and far from the id rules: valid alphabets around the length limits, one stray
/// character in a valid id, CRLF, NUL and other controls, unicode, up to 10k characters.
pub(crate) fn any_string() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[A-Za-z0-9_.-]{0,70}",
        3 => "[ -~]{0,135}",
        2 => ("[A-Za-z0-9]{0,40}", any::<char>(), "[A-Za-z0-9]{0,40}").prop_map(|(a, c, b)| format!("{a}{c}{b}")),
        1 => "[\\x00-\\x1f\\x7f]{1,8}",
        1 => "[a-z]{0,5}(\\r\\n|\\x00|\\t)[a-z]{0,5}",
        2 => any::<String>(),
        1 => "\\PC{1,80}",
        1 => (0..10_000usize, any::<char>()).prop_map(|(n, c)| c.to_string().repeat(n)),
        1 => (0..10_000usize).prop_map(|n| "a".repeat(n)),
    ]
}

/// Any JSON value: deep nesting, big and negative numbers, floats (and ones near the integer
/// limits), strings, wrong types.
pub(crate) fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop_oneof![Just(1.0), Just(-0.0), Just(1.5), Just(4_294_967_296.0)].prop_map(Value::from),
        any_string().prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::from),
            proptest::collection::vec(("[a-z_]{1,10}", inner), 0..8)
                .prop_map(|fields| Value::Object(fields.into_iter().collect())),
        ]
    })
}
