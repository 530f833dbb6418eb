//! Keeps `docs/CONFIG.md` from drifting away from the configuration.
//!
//! The format this test reads (and the doc keeps): every table whose header row is
//! `| key | default | env | meaning |` lists keys, one per row:
//! `` | `section.key` | `<default as JSON>` | `ROOM_SERVICE__SECTION__KEY` | meaning | ``.
//! The meaning of a secret key starts with `**Secret.**`. Nothing else in the file is read.

use std::collections::BTreeMap;

use crate::config::ENV_PREFIX;
use crate::config::error::SECRET_KEYS;
use crate::config::raw::default_keys;

/// One documented key: its default cell parsed as JSON, its env cell, its meaning, and the
/// line it is on.
struct Documented {
    default: serde_json::Value,
    env: String,
    meaning: String,
    line: usize,
}

/// The text inside a cell written as one code span (`` `x` ``), or `None`.
fn code_span(cell: &str) -> Option<&str> {
    cell.strip_prefix('`')?.strip_suffix('`').filter(|inner| !inner.contains('`'))
}

/// Every key row of the key tables of `doc`; fails on a malformed row, naming its line.
fn documented_keys(doc: &str) -> BTreeMap<String, Documented> {
    let mut keys = BTreeMap::new();
    let mut in_table = false;
    for (i, line) in doc.lines().enumerate() {
        let n = i + 1;
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').map(str::trim).collect();
        if !line.trim_start().starts_with('|') {
            in_table = false;
            continue;
        }
        if cells.len() >= 4 && cells[..4] == ["key", "default", "env", "meaning"] {
            in_table = true;
            continue;
        }
        if !in_table || cells.iter().all(|c| c.chars().all(|ch| matches!(ch, '-' | ':'))) {
            continue;
        }
        // The meaning is the last cell: a `|` in it would split the row, here as in markdown.
        assert!(
            cells.len() == 4,
            "docs/CONFIG.md:{n}: a key row needs 4 cells (key | default | env | meaning)"
        );
        let key = code_span(cells[0]).unwrap_or_else(|| {
            panic!("docs/CONFIG.md:{n}: the key cell must be `section.key`, got {}", cells[0])
        });
        let default = code_span(cells[1])
            .unwrap_or_else(|| panic!("docs/CONFIG.md:{n}: `{key}`: the default cell must be one code span"));
        let default = serde_json::from_str(default).unwrap_or_else(|e| {
            panic!("docs/CONFIG.md:{n}: `{key}`: the default {default} is not JSON ({e})")
        });
        let env = code_span(cells[2])
            .unwrap_or_else(|| panic!("docs/CONFIG.md:{n}: `{key}`: the env cell must be one code span"));
        let documented = Documented { default, env: env.to_owned(), meaning: cells[3].to_owned(), line: n };
        if let Some(first) = keys.insert(key.to_owned(), documented) {
            panic!("docs/CONFIG.md:{n}: `{key}` is documented twice (first on line {})", first.line);
        }
    }
    keys
}

/// `http.listen` → `ROOM_SERVICE__HTTP__LISTEN`.
fn env_name(key: &str) -> String {
    format!("{ENV_PREFIX}{}", key.replace('.', "__").to_ascii_uppercase())
}

/// The text of `docs/CONFIG.md`.
fn config_doc() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/CONFIG.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

#[test]
fn config_md_documents_exactly_the_keys_with_their_defaults_and_env_names() {
    let documented = documented_keys(&config_doc());
    let real: BTreeMap<String, serde_json::Value> = default_keys().into_iter().collect();
    let mut problems = Vec::new();
    for (key, default) in &real {
        assert!(
            *default != "<redacted>",
            "default_keys() redacts the default of `{key}`: list it with the secrets in raw::default_keys"
        );
        match documented.get(key) {
            None => problems.push(format!(
                "`{key}` is not documented: add `| `{key}` | `{default}` | `{}` | ... |`",
                env_name(key)
            )),
            Some(doc) => {
                if doc.default != *default {
                    problems.push(format!(
                        "`{key}` (line {}): documented default `{}`, real default `{default}`",
                        doc.line, doc.default
                    ));
                }
                if doc.env != env_name(key) {
                    problems.push(format!(
                        "`{key}` (line {}): env `{}`, should be `{}`",
                        doc.line,
                        doc.env,
                        env_name(key)
                    ));
                }
                let marked = doc.meaning.starts_with("**Secret.**");
                let secret = SECRET_KEYS.contains(&key.as_str());
                if marked != secret {
                    let should = if secret { "should" } else { "should not" };
                    problems.push(format!(
                        "`{key}` (line {}): its meaning {should} start with **Secret.**",
                        doc.line
                    ));
                }
            }
        }
    }
    for (key, doc) in documented.iter().filter(|(key, _)| !real.contains_key(*key)) {
        problems.push(format!("`{key}` (line {}) is documented but is not a configuration key", doc.line));
    }
    assert!(problems.is_empty(), "docs/CONFIG.md drifted from the configuration:\n{}", problems.join("\n"));
}

#[test]
fn the_key_table_parser_reads_only_key_tables() {
    let doc = "| a | b |\n|---|---|\n| `x.y` | 1 |\n\n| key | default | env | meaning |\n|---|---|---|---|\n\
               | `http.listen` | `\"127.0.0.1:8080\"` | `ROOM_SERVICE__HTTP__LISTEN` | The address. |\n\
               | `log.level` | `\"info\"` | `ROOM_SERVICE__LOG__LEVEL` | A level. |\n\ntext\n";
    let keys = documented_keys(doc);
    assert_eq!(keys.keys().collect::<Vec<_>>(), ["http.listen", "log.level"]);
    assert_eq!(keys["http.listen"].default, serde_json::json!("127.0.0.1:8080"));
    assert_eq!(keys["log.level"].env, "ROOM_SERVICE__LOG__LEVEL");
    assert_eq!(env_name("node_id"), "ROOM_SERVICE__NODE_ID");
}
