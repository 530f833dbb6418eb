//! The binary as an operator runs it outside `serve`: a missing config file, `config check`,
//! completions, `--version`, and a startup refused for an unsafe admin listener.

use std::path::Path;
use std::process::Output;

/// Runs the binary in `dir` with a clean `ROOM_SERVICE__*` environment plus `env`.
fn run(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_room-service"));
    command.current_dir(dir).args(args).env_remove("RUST_LOG");
    for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("ROOM_SERVICE__")) {
        command.env_remove(name);
    }
    command.envs(env.iter().copied()).output().expect("run room-service")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Every path under `dir`, for "created nothing" assertions.
fn tree(dir: &Path) -> Vec<String> {
    let mut paths = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(next).unwrap() {
            let path = entry.unwrap().path();
            paths.push(path.strip_prefix(dir).unwrap().display().to_string());
            if path.is_dir() {
                stack.push(path);
            }
        }
    }
    paths.sort();
    paths
}

#[test]
fn tools_refuse_a_missing_config_file_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["outbox", "stats"][..],
        &["migrate"],
        &["config", "check"],
        &["outbox", "--config", "etc/x.yaml", "stats"],
    ] {
        let output = run(dir.path(), args, &[]);
        assert!(!output.status.success(), "{args:?} succeeded without a config file");
        let message = stderr(&output);
        assert!(message.contains("not found") && message.contains("--config"), "{args:?}: {message}");
        assert!(message.contains(".yaml"), "{args:?} does not name the path: {message}");
    }
    assert_eq!(tree(dir.path()), Vec::<String>::new(), "a tool created files");
}

#[test]
fn outbox_tools_never_create_a_sqlite_database() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.yaml"), "database: {url: \"sqlite://data/rooms.db?mode=rwc\"}\n")
        .unwrap();
    let output = run(dir.path(), &["--config", "config.yaml", "outbox", "stats"], &[]);
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(message.contains("no SQLite database") && message.contains("rooms.db"), "{message}");
    assert_eq!(tree(dir.path()), vec!["config.yaml".to_owned()]);
}

#[test]
fn tools_log_warnings_only_and_print_just_their_output() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("rooms.db");
    std::fs::write(
        dir.path().join("config.yaml"),
        format!("database: {{url: \"sqlite://{}?mode=rwc\"}}\n", db.display()),
    )
    .unwrap();
    let migrated = run(dir.path(), &["--config", "config.yaml", "migrate"], &[]);
    assert!(migrated.status.success(), "{}", stderr(&migrated));
    let output = run(dir.path(), &["--config", "config.yaml", "outbox", "stats", "--json"], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stderr(&output), "", "an operator command logged at info");
    let stats: serde_json::Value = serde_json::from_slice(&output.stdout).expect("stdout is the JSON answer");
    assert!(stats.is_object(), "{stats}");
}

#[test]
fn config_check_validates_and_prints_the_effective_settings_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("c.yaml"), "database: {url: \"mysql://room:db-pass@db:3306/rooms\"}\n")
        .unwrap();
    let secrets = [
        ("ROOM_SERVICE__TENCENT_IM__SECRET_KEY", "im-key-value"),
        ("ROOM_SERVICE__HTTP__ADMIN_TOKEN", "admin-token-value"),
        ("ROOM_SERVICE__HTTP__ADMIN_LISTEN", "0.0.0.0:9091"),
    ];
    let output = run(dir.path(), &["--config", "c.yaml", "config", "check"], &secrets);
    assert!(output.status.success(), "{}", stderr(&output));
    let printed = String::from_utf8_lossy(&output.stdout).into_owned() + &stderr(&output);
    for secret in ["im-key-value", "admin-token-value", "db-pass"] {
        assert!(!printed.contains(secret), "{secret} printed:\n{printed}");
    }
    assert!(printed.contains("admin_listen: 0.0.0.0:9091"), "{printed}");
    assert!(printed.contains("valid"), "{printed}");

    // Broken: non-zero, every key at fault named, nothing printed on stdout.
    std::fs::write(
        dir.path().join("bad.yaml"),
        "http: {listen: nowhere}\noutbox_worker: {batch_size: 100000}\n",
    )
    .unwrap();
    let output = run(dir.path(), &["--config", "bad.yaml", "config", "check"], &[]);
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(message.contains("http.listen") && message.contains("outbox_worker.batch_size"), "{message}");
    assert!(output.stdout.is_empty());
}

#[test]
fn serve_refuses_a_non_loopback_admin_listener_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("c.yaml"),
        "http: {listen: \"127.0.0.1:0\", admin_listen: \"0.0.0.0:0\"}\n",
    )
    .unwrap();
    let output = run(dir.path(), &["--config", "c.yaml", "serve"], &[]);
    assert!(!output.status.success(), "started with an open admin listener");
    let message = stderr(&output);
    assert!(message.contains("http.admin_listen") && message.contains("http.admin_token"), "{message}");
    assert_eq!(tree(dir.path()), vec!["c.yaml".to_owned()], "nothing was created before refusing");
}

#[test]
fn completions_and_version() {
    let dir = tempfile::tempdir().unwrap();
    let output = run(dir.path(), &["completions", "bash"], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let script = String::from_utf8_lossy(&output.stdout);
    assert!(
        script.contains("room-service") && script.contains("outbox") && script.contains("complete"),
        "{script}"
    );
    let output = run(dir.path(), &["--version"], &[]);
    let version = String::from_utf8_lossy(&output.stdout);
    assert!(
        version.starts_with(&format!("room-service {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
    assert!(!version.contains("(commit unknown)"), "built in a git checkout: {version}");
}
