//! Keeps `docs/API.md` from drifting away from the code.
//!
//! The format this test reads (and the doc keeps):
//! - a route is a heading `### METHOD /path` (exactly two words), inside the section
//!   `## Public listener ...` or `## Admin listener ...`; any other `## ` heading ends the
//!   listener section, and a route heading outside one fails;
//! - error codes are the rows `` | `code` | status | ... `` of the table under `## Error codes`.
//!
//! Checked: every documented route reaches a handler of the real router of its listener (not
//! the fallback) and only the fallback of the other listener; every `.route(...)` of
//! `src/http/mod.rs` is documented on its listener; every error code string in `src/http` and
//! `src/api` (and the domain errors) is in the error table with the status the code answers it with, and the
//! table lists no code the code never answers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request};
use room_service::http::{PublicOptions, V1_ROUTES, admin_router, public_router};
use serde_json::Value;
use tower::ServiceExt;

use crate::support::TestDb;
use crate::support::app::router_state;

/// Which listener serves a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Listener {
    /// `http.listen`: `public_router`.
    Public,
    /// `http.admin_listen`: `admin_router`.
    Admin,
}

/// A route: its listener, method (upper case) and path pattern (`/v1/rooms/{room_id}`).
type Route = (Listener, String, String);

/// A file of the repository, as text.
fn repo_file(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The lines of a markdown text outside fenced code blocks, with their line numbers.
fn prose_lines(doc: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (i, line) in doc.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            lines.push((i + 1, line));
        }
    }
    lines
}

/// The routes API.md documents, in order, from its `### METHOD /path` headings.
fn documented_routes(doc: &str) -> Vec<Route> {
    let mut listener = None;
    let mut routes = Vec::new();
    for (n, line) in prose_lines(doc) {
        if let Some(title) = line.strip_prefix("## ") {
            listener = if title.starts_with("Public listener") {
                Some(Listener::Public)
            } else if title.starts_with("Admin listener") {
                Some(Listener::Admin)
            } else {
                None
            };
            continue;
        }
        let Some(title) = line.strip_prefix("### ") else {
            continue;
        };
        let words: Vec<&str> = title.split_whitespace().collect();
        let looks_like_method =
            words.first().is_some_and(|w| w.len() >= 3 && w.bytes().all(|b| b.is_ascii_uppercase()));
        if !looks_like_method {
            continue;
        }
        assert!(
            words.len() == 2 && words[1].starts_with('/'),
            "docs/API.md:{n}: a route heading must be exactly `### METHOD /path`, got `{line}`"
        );
        let listener = listener.unwrap_or_else(|| {
            panic!(
                "docs/API.md:{n}: route heading `{line}` is outside the `## Public listener` / \
                 `## Admin listener` sections"
            )
        });
        routes.push((listener, words[0].to_owned(), words[1].to_owned()));
    }
    routes
}

/// The body of the function `pub fn {name}` in `source`: up to the first line that is `}`.
fn function_body<'a>(source: &'a str, name: &str) -> &'a str {
    let start = source
        .find(&format!("pub fn {name}("))
        .unwrap_or_else(|| panic!("src/http/mod.rs has no `pub fn {name}(`"));
    let rest = &source[start..];
    let end = rest.find("\n}\n").map_or(rest.len(), |e| e + 3);
    &rest[..end]
}

/// The `.route("PATH", METHOD(handler)[.METHOD(handler)...])` calls in `body`, any number per
/// line.
fn routes_in(body: &str, listener: Listener) -> Vec<Route> {
    const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];
    for unread in [".nest(", ".nest_service(", ".route_service("] {
        assert!(
            !body.contains(unread),
            "src/http/mod.rs uses `{unread}`: teach tests/it/api/docs.rs to read it"
        );
    }
    let mut routes = Vec::new();
    for (at, _) in body.match_indices(".route(") {
        // The path may be on the next line; it must be a literal for this test to read it.
        let Some(rest) = body[at + ".route(".len()..].trim_start().strip_prefix('"') else {
            panic!("src/http/mod.rs: a `.route(` whose path is not a string literal; make it one");
        };
        let path_end = rest.find('"').expect("a closing quote after the route path");
        let path = &rest[..path_end];
        let mut rest = rest[path_end + 1..].trim_start().strip_prefix(',').expect("`,` after the path");
        loop {
            rest = rest.trim_start();
            let name_end = rest.find('(').expect("a method router call after the path");
            let name = &rest[..name_end];
            assert!(
                METHODS.contains(&name),
                "src/http/mod.rs: `.route(\"{path}\", {name}(...))`: unknown method"
            );
            routes.push((listener, name.to_ascii_uppercase(), path.to_owned()));
            // Skip to the matching parenthesis, then follow a `.other_method(...)` chain.
            let mut depth = 0;
            let mut close = None;
            for (i, c) in rest[name_end..].char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            close = Some(name_end + i);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let close = close.expect("balanced parentheses in the method router call");
            rest = &rest[close + 1..];
            match rest.trim_start().strip_prefix('.') {
                Some(next) if METHODS.iter().any(|m| next.starts_with(&format!("{m}("))) => rest = next,
                _ => break,
            }
        }
    }
    routes
}

/// Every route `src/http/mod.rs` registers, with its listener.
fn source_routes() -> Vec<Route> {
    let source = repo_file("src/http/mod.rs");
    let mut routes = routes_in(function_body(&source, "public_router"), Listener::Public);
    routes.extend(routes_in(function_body(&source, "admin_router"), Listener::Admin));
    for listener in [Listener::Public, Listener::Admin] {
        assert!(
            routes.iter().any(|r| r.0 == listener),
            "found no `.route(` of the {listener:?} router in src/http/mod.rs: has the router moved?"
        );
    }
    routes
}

#[test]
fn the_route_parser_follows_chained_routes_and_methods() {
    let body = r#"Router::new().route("/a", get(a)).route("/b/{id}", post(b::c).get(d))
        .route(
            "/c",
            get(e),
        )"#;
    let routes: Vec<(String, String)> =
        routes_in(body, Listener::Public).into_iter().map(|(_, m, p)| (m, p)).collect();
    let want = [("GET", "/a"), ("POST", "/b/{id}"), ("GET", "/b/{id}"), ("GET", "/c")];
    assert_eq!(routes, want.map(|(m, p)| (m.to_owned(), p.to_owned())));
}

/// The path with sample values in place of its `{placeholders}`.
fn sample_path(pattern: &str) -> String {
    pattern
        .split('/')
        .map(|segment| match segment {
            "{room_id}" => "r1".to_owned(),
            "{event_id}" => "ev-1".to_owned(),
            s if s.starts_with('{') => "x1".to_owned(),
            s => s.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// True when `router` answers `method path` with its not-found or method-not-allowed fallback.
async fn hits_fallback(router: &Router, method: &str, path: &str) -> bool {
    let method = Method::from_bytes(method.as_bytes()).expect("a valid HTTP method");
    let body = if method == Method::GET { Body::empty() } else { Body::from("{}") };
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(body)
        .expect("a valid request");
    let response = router.clone().oneshot(request).await.expect("routers are infallible");
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.expect("a readable body");
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let code = body["error"]["code"].as_str().unwrap_or_default();
    let message = body["error"]["message"].as_str().unwrap_or_default();
    (code == "not_found" && message == "no such route")
        || (code == "method_not_allowed" && message.ends_with("is not allowed on this route"))
}

#[tokio::test]
async fn every_documented_route_reaches_a_handler_of_its_listener_only() {
    let doc = repo_file("docs/API.md");
    let documented = documented_routes(&doc);
    assert!(!documented.is_empty(), "docs/API.md documents no `### METHOD /path` route");

    let db = TestDb::sqlite().await;
    let state = router_state(&db);
    let public = public_router(state.clone(), PublicOptions::default());
    let admin = admin_router(state, None);

    let mut wrong = Vec::new();
    for (listener, method, pattern) in &documented {
        let path = sample_path(pattern);
        let (own, other) = match listener {
            Listener::Public => (&public, &admin),
            Listener::Admin => (&admin, &public),
        };
        // The cluster hop is mounted only with a cluster (this state has none): it must be
        // served by no listener here, and is tried by `tests/it/cluster/hop.rs`.
        let cluster_only = *pattern == "/internal/v1/operations";
        if !cluster_only && hits_fallback(own, method, &path).await {
            wrong.push(format!("{method} {pattern} ({path}) is not a route of the {listener:?} listener"));
        }
        if !hits_fallback(other, method, &path).await {
            wrong.push(format!(
                "{method} {pattern} ({path}) is also served by the other listener than {listener:?}"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/API.md documents routes the routers do not serve as documented:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_route_of_the_routers_is_documented_on_its_listener() {
    let doc = repo_file("docs/API.md");
    let documented = documented_routes(&doc);
    let mut seen = BTreeSet::new();
    for route in &documented {
        assert!(seen.insert(route.clone()), "docs/API.md documents {route:?} twice");
    }
    let source: BTreeSet<Route> = source_routes().into_iter().collect();
    let missing: Vec<String> = source
        .difference(&seen)
        .map(|(listener, method, path)| {
            let section = match listener {
                Listener::Public => "## Public listener",
                Listener::Admin => "## Admin listener",
            };
            format!("`### {method} {path}` (under `{section}`)")
        })
        .collect();
    assert!(missing.is_empty(), "docs/API.md is missing routes of src/http/mod.rs:\n{}", missing.join("\n"));
    let stale: Vec<String> = seen
        .difference(&source)
        .map(|(listener, method, path)| format!("{method} {path} ({listener:?})"))
        .collect();
    assert!(
        stale.is_empty(),
        "docs/API.md documents routes src/http/mod.rs does not register:\n{}",
        stale.join("\n")
    );
}

#[tokio::test]
async fn the_v1_routes_whose_series_start_at_zero_are_the_public_routers_v1_routes() {
    let served: BTreeSet<(String, String)> = source_routes()
        .into_iter()
        .filter(|(listener, _, path)| *listener == Listener::Public && path.starts_with("/v1/"))
        .map(|(_, method, path)| (method, path))
        .collect();
    let listed: BTreeSet<(String, String)> =
        V1_ROUTES.iter().map(|&(method, path)| (method.to_owned(), path.to_owned())).collect();
    assert_eq!(listed.len(), V1_ROUTES.len(), "http::V1_ROUTES lists a route twice");
    assert_eq!(listed, served, "http::V1_ROUTES must list exactly the /v1 routes of public_router");
    // And each one is served (not only written down): the router itself answers it.
    let db = TestDb::sqlite().await;
    let public = public_router(router_state(&db), PublicOptions::default());
    for (method, pattern) in V1_ROUTES {
        let path = sample_path(pattern);
        assert!(
            !hits_fallback(&public, method, &path).await,
            "{method} {pattern} is not served by public_router"
        );
    }
}

/// The HTTP status of a `StatusCode::NAME` constant used for an error answer.
fn status_of(name: &str) -> u16 {
    match name {
        "BAD_REQUEST" => 400,
        "UNAUTHORIZED" => 401,
        "FORBIDDEN" => 403,
        "NOT_FOUND" => 404,
        "METHOD_NOT_ALLOWED" => 405,
        "CONFLICT" => 409,
        "PAYLOAD_TOO_LARGE" => 413,
        "UNSUPPORTED_MEDIA_TYPE" => 415,
        "UNPROCESSABLE_ENTITY" => 422,
        "TOO_MANY_REQUESTS" => 429,
        "INTERNAL_SERVER_ERROR" => 500,
        "BAD_GATEWAY" => 502,
        "SERVICE_UNAVAILABLE" => 503,
        other => panic!("StatusCode::{other} is new to tests/it/api/docs.rs: add it to status_of"),
    }
}

/// True for a `snake_case` error code.
fn is_code(text: &str) -> bool {
    text.starts_with(|c: char| c.is_ascii_lowercase())
        && text.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
}

/// The error codes one source file can answer, each with the statuses it comes with (empty
/// when the file writes the code into a canned JSON body).
fn codes_in(source: &str, codes: &mut BTreeMap<String, BTreeSet<u16>>) {
    // `ApiError::new(StatusCode::X, "code", ...)` and `(StatusCode::X, "code")`, over line breaks.
    for (at, _) in source.match_indices("StatusCode::") {
        let rest = &source[at + "StatusCode::".len()..];
        let name_end = rest.find(|c: char| !(c.is_ascii_uppercase() || c == '_')).unwrap_or(rest.len());
        let Some(after) = rest[name_end..].trim_start().strip_prefix(',') else {
            continue;
        };
        let Some(literal) = after.trim_start().strip_prefix('"') else {
            continue;
        };
        let code = &literal[..literal.find('"').unwrap_or(0)];
        if is_code(code) {
            codes.entry(code.to_owned()).or_default().insert(status_of(&rest[..name_end]));
        }
    }
    if source.contains("ApiError::invalid(") {
        codes.entry("invalid_argument".to_owned()).or_default().insert(400);
    }
    // Canned bodies such as server.rs's `{"error":{"code":"overloaded",...}}`.
    for (at, _) in source.match_indices("\"code\":\"") {
        let rest = &source[at + "\"code\":\"".len()..];
        let code = &rest[..rest.find('"').unwrap_or(0)];
        if is_code(code) {
            codes.entry(code.to_owned()).or_default();
        }
    }
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// The error codes the service can answer, from `src/http/**/*.rs`, `src/api/**/*.rs` and
/// `src/domain/error.rs`.
fn source_codes() -> BTreeMap<String, BTreeSet<u16>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src/http"), &mut files);
    rust_files(&root.join("src/api"), &mut files);
    files.push(root.join("src/domain/error.rs"));
    let mut codes = BTreeMap::new();
    for file in files {
        let source =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
        codes_in(&source, &mut codes);
    }
    // The extraction itself must keep working: codes every version answers.
    for known in ["invalid_argument", "command_conflict", "version_conflict", "overloaded", "unauthorized"] {
        assert!(
            codes.contains_key(known),
            "found no `{known}` in src/http or src/api: has the error mapping moved?"
        );
    }
    codes
}

/// The `| `code` | status | ... |` rows of the table under `## Error codes`.
fn documented_codes(doc: &str) -> BTreeMap<String, BTreeSet<u16>> {
    let mut in_section = false;
    let mut codes: BTreeMap<String, BTreeSet<u16>> = BTreeMap::new();
    for (n, line) in prose_lines(doc) {
        if let Some(title) = line.strip_prefix("## ") {
            in_section = title.trim() == "Error codes";
            continue;
        }
        if !in_section || !line.starts_with("| `") {
            continue;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let code = cells[0].trim_matches('`');
        assert!(is_code(code), "docs/API.md:{n}: `{}` is not a snake_case error code", cells[0]);
        let statuses = cells.get(1).copied().unwrap_or_default();
        let statuses: BTreeSet<u16> = statuses
            .split([',', ' '])
            .filter(|s| !s.is_empty() && *s != "or")
            .map(|s| s.parse().unwrap_or_else(|_| panic!("docs/API.md:{n}: `{statuses}` is not a status")))
            .collect();
        assert!(
            codes.insert(code.to_owned(), statuses).is_none(),
            "docs/API.md:{n}: `{code}` is listed twice"
        );
    }
    assert!(
        !codes.is_empty(),
        "docs/API.md has no `## Error codes` table of `| `code` | status | ... |` rows"
    );
    codes
}

#[test]
fn every_error_code_the_code_answers_is_documented_with_its_status() {
    let documented = documented_codes(&repo_file("docs/API.md"));
    let source = source_codes();
    let mut problems = Vec::new();
    for (code, statuses) in &source {
        match documented.get(code) {
            None => {
                problems.push(format!("`{code}` ({statuses:?}) is missing from the `## Error codes` table"))
            }
            Some(doc) if !statuses.is_empty() && doc != statuses => {
                problems.push(format!("`{code}`: documented with status {doc:?}, answered with {statuses:?}"))
            }
            Some(_) => {}
        }
    }
    for code in documented.keys().filter(|c| !source.contains_key(*c)) {
        problems.push(format!("`{code}` is documented but never answered by src/http or src/api"));
    }
    assert!(problems.is_empty(), "docs/API.md error codes drifted:\n{}", problems.join("\n"));
}
