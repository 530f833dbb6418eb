//! Property test of the public router's request decoding: arbitrary paths, content types and
//! bodies (arbitrary JSON, near-valid bodies with one raw token swapped in, positional arrays,
//! duplicate keys, deep nesting, huge numbers, bytes that are not JSON, bodies over the limit)
//! get a 2xx or a 4xx with the JSON error body — never a 5xx, never a panic.
//!
//! The router runs in-process (`tower::ServiceExt::oneshot`) over a SQLite file, so valid
//! commands really commit; one runtime and one router serve every case.

use std::collections::BTreeMap;
use std::sync::Mutex;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::support::TestDb;
use crate::support::app::router_state;

/// How many requests the property sends.
const CASES: u32 = 256;

/// One generated request.
#[derive(Debug, Clone)]
struct Case {
    /// Request path (already percent-encoded).
    path: String,
    /// `content-type`, if any.
    content_type: Option<&'static str>,
    /// The body bytes.
    body: Vec<u8>,
}

/// The body fields of each command route.
const ROUTES: &[(&str, &[&str])] = &[
    ("join", &["command_id", "user_id"]),
    ("leave", &["command_id", "user_id"]),
    ("gifts", &["command_id", "sender_id", "receiver_id", "gift_id", "count", "unit_value"]),
    ("close", &["command_id"]),
    ("heartbeat", &["user_id"]),
    ("heartbeats", &["user_ids"]),
];
/// The body fields of `POST /v1/rooms`.
const CREATE: &[&str] = &["command_id", "room_id", "owner_id", "title"];

/// Strings near and far from the id rules: CRLF, NUL, unicode, up to 10k characters.
fn any_string() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[A-Za-z0-9_.-]{1,66}",
        2 => "[ -~]{0,130}",
        1 => "[a-z]{0,5}(\\r\\n|\\x00|\\t| )[a-z]{0,5}",
        2 => any::<String>(),
        1 => (0..10_000usize, any::<char>()).prop_map(|(n, c)| c.to_string().repeat(n)),
    ]
}

/// Any JSON value: nested arrays and objects, big, negative and float numbers, strings.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        any_string().prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            proptest::collection::vec(("[a-z_]{1,10}", inner), 0..6)
                .prop_map(|fields| Value::Object(fields.into_iter().collect())),
        ]
    })
}

/// A value for field `name`: mostly one the service takes (so commands reach the room and
/// commit), often anything at all.
fn field_value(name: &'static str) -> BoxedStrategy<Value> {
    let plausible: BoxedStrategy<Value> = match name {
        "command_id" => prop_oneof![
            3 => "[a-z0-9]{1,12}",
            1 => "c[0-3]",
            1 => Just("presence:stale:00".to_owned()),
            1 => "[ -~]{1,130}",
        ]
        .prop_map(Value::from)
        .boxed(),
        "room_id" => prop_oneof![3 => "r[1-3]", 1 => any_string()].prop_map(Value::from).boxed(),
        "title" => {
            prop_oneof![3 => Just("Live".to_owned()), 1 => any::<String>()].prop_map(Value::from).boxed()
        }
        "count" | "unit_value" => prop_oneof![
            6 => (1..=5u32).prop_map(Value::from),
            1 => any::<u32>().prop_map(Value::from),
            1 => any::<i64>().prop_map(Value::from),
        ]
        .boxed(),
        _ => prop_oneof![6 => "alice|bob|carol", 1 => any_string()].prop_map(Value::from).boxed(),
    };
    prop_oneof![8 => plausible, 1 => any_json()].boxed()
}

/// Raw JSON text that no `serde_json::Value` holds, or that is hostile to a parser.
fn raw_token() -> impl Strategy<Value = String> {
    prop_oneof![
        select(vec![
            "1e400",
            "-1e400",
            "-0",
            "18446744073709551616",
            "4294967296",
            "-1",
            "1.5",
            "1e2",
            "0x10",
            "NaN",
            "Infinity",
            "\"\\u0000\"",
            "\"\\ud800\"",
            "\"a\\r\\nb\"",
            "\"\"",
            "01",
            "+1",
            "true",
            "{}",
            "[]",
        ])
        .prop_map(str::to_owned),
        "[0-9]{20,400}",
        (1..10_000usize).prop_map(|n| format!("{}{}", "[".repeat(n), "]".repeat(n))),
        (1..2_000usize).prop_map(|n| format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n))),
    ]
}

/// A body for `fields`: an object of (sometimes missing) field values with maybe one more
/// key; as text, maybe with one value swapped for a raw token, a key repeated, or as a
/// positional array.
fn body_for(fields: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    let values: Vec<_> =
        fields.iter().map(|name| proptest::option::weighted(0.97, field_value(name))).collect();
    let extra = proptest::option::weighted(0.05, ("[a-z_]{1,12}", any_json()));
    let shape = prop_oneof![12 => Just(0u8), 2 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)];
    (values, extra, shape, raw_token(), any::<prop::sample::Index>()).prop_map(
        move |(values, extra, shape, raw, index)| {
            let mut entries: Vec<(String, String)> = fields
                .iter()
                .zip(values)
                .filter_map(|(name, v)| v.map(|v| (json!(name).to_string(), v.to_string())))
                .collect();
            if let Some((key, value)) = extra {
                entries.push((json!(key).to_string(), value.to_string()));
            }
            match shape {
                // One value swapped for a raw token.
                1 if !entries.is_empty() => {
                    let i = index.index(entries.len());
                    entries[i].1 = raw;
                }
                // A key given twice.
                2 if !entries.is_empty() => {
                    let i = index.index(entries.len());
                    entries.push((entries[i].0.clone(), raw));
                }
                // The values alone, in order: the positional form serde's structs take.
                3 => {
                    let values: Vec<String> = entries.into_iter().map(|(_, v)| v).collect();
                    return format!("[{}]", values.join(",")).into_bytes();
                }
                _ => {}
            }
            let fields: Vec<String> = entries.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
            format!("{{{}}}", fields.join(",")).into_bytes()
        },
    )
}

/// Percent-encodes every byte outside the unreserved set, so any bytes make a valid path.
fn encode_segment(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// One request: a command route (room `r1` mostly, which stays open), a content type, a body.
fn case() -> impl Strategy<Value = Case> {
    let room = prop_oneof![
        8 => Just("r1".to_owned()),
        1 => Just("nope".to_owned()),
        1 => proptest::collection::vec(any::<u8>(), 0..80).prop_map(|b| encode_segment(&b)),
        1 => any::<String>().prop_map(|s| encode_segment(s.as_bytes())),
    ];
    let route = prop_oneof![
        5 => (room, select(ROUTES.to_vec())).prop_flat_map(|(room, (route, fields))| {
            // A close of r1 would turn every later case into 409 room_closed: closes go to
            // the rooms the cases may create.
            let room = if route == "close" && room == "r1" { "r2".to_owned() } else { room };
            (Just(format!("/v1/rooms/{room}/{route}")), body_for(fields))
        }),
        1 => body_for(CREATE).prop_map(|body| ("/v1/rooms".to_owned(), body)),
    ];
    let body_override = prop_oneof![
        24 => Just(None),
        1 => any_json().prop_map(|v| Some(v.to_string().into_bytes())),
        1 => raw_token().prop_map(|t| Some(t.into_bytes())),
        1 => proptest::collection::vec(any::<u8>(), 0..200).prop_map(Some),
        1 => any::<String>().prop_map(|s| Some(s.into_bytes())),
        // Over the 64 KiB body limit.
        1 => (65_000..70_000usize).prop_map(|n| Some(json!({"command_id": "c", "user_id": "u".repeat(n)}).to_string().into_bytes())),
    ];
    let content_type = prop_oneof![
        24 => Just(Some("application/json")),
        1 => Just(Some("application/json; charset=utf-8")),
        1 => Just(Some("text/plain")),
        1 => Just(None),
    ];
    (route, body_override, content_type).prop_map(|((path, body), body_override, content_type)| Case {
        path,
        content_type,
        body: body_override.unwrap_or(body),
    })
}

/// Sends `case` and checks the answer: 2xx (JSON, or 204) or 4xx with `{"error":{code,message}}`.
async fn check(
    app: axum::Router,
    case: Case,
    statuses: &Mutex<BTreeMap<u16, usize>>,
) -> Result<(), TestCaseError> {
    let mut request = Request::builder().method("POST").uri(&case.path);
    if let Some(content_type) = case.content_type {
        request = request.header("content-type", content_type);
    }
    let request = request.body(Body::from(case.body.clone())).unwrap();
    let response = app.oneshot(request).await.unwrap();
    let status = response.status();
    *statuses.lock().unwrap().entry(status.as_u16()).or_default() += 1;
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
    let shown = String::from_utf8_lossy(&case.body);
    let shown: String = shown.chars().take(300).collect();
    let answer = String::from_utf8_lossy(&bytes);
    prop_assert!(
        status.is_success() || status.is_client_error(),
        "{} {:?} {}: {} {}",
        case.path,
        case.content_type,
        shown,
        status,
        answer
    );
    if status == StatusCode::NO_CONTENT {
        return Ok(());
    }
    let body: Value = serde_json::from_slice(&bytes)
        .map_err(|e| TestCaseError::fail(format!("{status} answer is not JSON ({e}): {answer}")))?;
    if status.is_client_error() {
        prop_assert!(body["error"]["code"].is_string(), "{} {}: {}", case.path, shown, body);
        prop_assert!(body["error"]["message"].is_string(), "{} {}: {}", case.path, shown, body);
    } else {
        prop_assert!(body.is_object(), "{}: {}", case.path, body);
    }
    Ok(())
}

#[test]
fn arbitrary_requests_get_a_2xx_or_a_4xx_json_error_never_a_5xx() {
    use room_service::http::{PublicOptions, public_router};

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (app, _db) = runtime.block_on(async {
        let db = TestDb::sqlite().await;
        let app = public_router(router_state(&db), PublicOptions::default());
        // Room r1 with members, so gifts and leaves reach the domain.
        let setup = [
            (
                "/v1/rooms",
                json!({"command_id": "setup-1", "room_id": "r1", "owner_id": "alice", "title": "Live"}),
            ),
            ("/v1/rooms/r1/join", json!({"command_id": "setup-2", "user_id": "alice"})),
            ("/v1/rooms/r1/join", json!({"command_id": "setup-3", "user_id": "bob"})),
        ];
        for (path, body) in setup {
            let request = Request::builder()
                .method("POST")
                .uri(path)
                .header("content-type", "application/json")
                .body(Body::from(body.to_string()))
                .unwrap();
            assert_eq!(app.clone().oneshot(request).await.unwrap().status(), 200, "{path}");
        }
        (app, db)
    });

    let statuses = Mutex::new(BTreeMap::new());
    let mut runner = TestRunner::new(Config { cases: CASES, failure_persistence: None, ..Config::default() });
    let result = runner.run(&case(), |case| runtime.block_on(check(app.clone(), case, &statuses)));
    let statuses = statuses.into_inner().unwrap();
    eprintln!("statuses over {CASES} cases (and shrinking): {statuses:?}");
    if let Err(e) = result {
        panic!("{e}");
    }
    // The generator reaches both the rooms (about 15% 2xx) and the refusals (about 60% 400).
    let successes: usize = statuses.iter().filter(|(s, _)| (200..300).contains(*s)).map(|(_, n)| n).sum();
    assert!(successes >= CASES as usize / 32, "{statuses:?}");
    assert!(statuses.get(&400).is_some_and(|&n| n >= CASES as usize / 5), "{statuses:?}");
}

#[tokio::test]
async fn a_positional_array_body_is_a_400_asking_for_an_object() {
    use room_service::http::{PublicOptions, public_router};

    let db = TestDb::sqlite().await;
    let app = public_router(router_state(&db), PublicOptions::default());
    // Serde's derived structs take `[command_id, room_id, owner_id, title]` as well.
    let request = Request::builder()
        .method("POST")
        .uri("/v1/rooms")
        .header("content-type", "application/json")
        .body(Body::from(r#"["c1", "r1", "alice", "Live"]"#))
        .unwrap();
    let response = app.oneshot(request).await.unwrap();
    assert_eq!(response.status(), 400);
    let body: Value =
        serde_json::from_slice(&axum::body::to_bytes(response.into_body(), 4096).await.unwrap()).unwrap();
    assert_eq!(body["error"]["code"], "invalid_argument");
    assert!(body["error"]["message"].as_str().unwrap().contains("expected a JSON object"), "{body}");
    assert_eq!(db.count("room_command_log").await, 0, "nothing created");
}
