//! B6, memory: resident memory (`VmRSS` of `/proc/self/status`) of the service, twice:
//!
//! - with `memory_rooms` active rooms × 10 members, built through the real command path over
//!   HTTP (CreateRoom, then ten JoinRoom per room; IM disabled, so events go to the log sink);
//! - with ONE room of `memory_members` members, filled straight in SQL (`fill`) before the
//!   service starts and then loaded by one `GET /v1/rooms/{id}` (its member count checked).
//!
//! Each runs in a child process (this binary re-run with a hidden flag), so nothing the other
//! benchmarks allocated counts; the child prints `VMRSS_KB <after start> <with the rooms>
//! <peak> <seconds>`. The figure includes the in-process HTTP client, so it is an upper bound.

use std::time::{Duration, Instant};

use futures::StreamExt;
use room_service::app;
use room_service::store::Repository;
use serde_json::json;

use crate::Args;
use crate::fill;
use crate::report::Line;
use crate::support::{self, BenchDb};

const MEMBERS: usize = 10;
const CONCURRENCY: usize = 16;
const TARGET_MB: f64 = 200.0;
const ONE_ROOM_TARGET_MB: f64 = 100.0;
/// The one big room.
const BIG_ROOM: &str = "big";

/// Runs B6's two measurements, each in a child process, and returns their lines.
pub async fn run(args: &Args) -> anyhow::Result<Vec<Line>> {
    let [idle, loaded, _, secs] = in_child(args, false).await?;
    let per = per_member(idle, loaded, args.memory_rooms * MEMBERS);
    let many = rss_line(
        &format!("B6 VmRSS, {} rooms × {MEMBERS} members", args.memory_rooms),
        loaded,
        format!("{idle:.1} MB just started; {per:.0} B/member; built in {secs:.0}s"),
        TARGET_MB,
    );
    let [idle, loaded, peak, secs] = in_child(args, true).await?;
    let per = per_member(idle, loaded, args.memory_members);
    let one = rss_line(
        &format!("B6 VmRSS, 1 room × {} members", args.memory_members),
        loaded,
        format!("{idle:.1} MB just started; {per:.0} B/member; peak {peak:.1} MB; loaded in {secs:.2}s"),
        ONE_ROOM_TARGET_MB,
    );
    Ok(vec![many, one])
}

/// A resident-memory figure of `loaded` MB against its target of `target_mb`.
fn rss_line(name: &str, loaded: f64, baseline: String, target_mb: f64) -> Line {
    let ratio = format!("{:.2} of target", loaded / target_mb);
    Line::new(
        name,
        format!("{loaded:.1} MB"),
        baseline,
        ratio,
        &format!("≤ {target_mb:.0} MB"),
        loaded <= target_mb,
    )
}

/// Runs the child (`one_room`: the big room) and returns its figures: MB just started, MB with
/// the rooms, peak MB, seconds to build or load.
async fn in_child(args: &Args, one_room: bool) -> anyhow::Result<[f64; 4]> {
    let exe = std::env::current_exe()?;
    let mut command = tokio::process::Command::new(exe);
    command
        .arg("--memory-child")
        .arg("--mysql-url")
        .arg(&args.mysql_url)
        .arg("--memory-rooms")
        .arg(args.memory_rooms.to_string())
        .arg("--memory-members")
        .arg(args.memory_members.to_string());
    if one_room {
        command.arg("--memory-one-room");
    }
    let output = command.output().await?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    anyhow::ensure!(
        output.status.success(),
        "memory child failed: {}{}",
        stdout,
        String::from_utf8_lossy(&output.stderr)
    );
    let figures: Vec<f64> = stdout
        .lines()
        .find_map(|l| l.strip_prefix("VMRSS_KB "))
        .map(|rest| rest.split_whitespace().filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_default();
    let [idle_kb, loaded_kb, peak_kb, secs] = figures[..] else {
        anyhow::bail!("memory child printed no figures: {stdout}");
    };
    Ok([idle_kb / 1024.0, loaded_kb / 1024.0, peak_kb / 1024.0, secs])
}

fn per_member(idle_mb: f64, loaded_mb: f64, members: usize) -> f64 {
    (loaded_mb - idle_mb) * 1024.0 * 1024.0 / members.max(1) as f64
}

/// The child: builds the rooms (or loads the big one) and prints
/// `VMRSS_KB <idle> <loaded> <peak> <seconds>`.
pub async fn child(args: &Args) -> anyhow::Result<()> {
    let (idle, loaded, secs) = BenchDb::scoped(&args.mysql_url, "b6", async |db| {
        if args.memory_one_room { one_room(args, db).await } else { build(args, db).await }
    })
    .await?;
    println!("VMRSS_KB {idle} {loaded} {} {secs:.2}", vm_kb("VmHWM:")?);
    Ok(())
}

async fn build(args: &Args, db: &BenchDb) -> anyhow::Result<(u64, u64, f64)> {
    let settings = support::settings(&db.url(), None, &[("outbox_worker.enabled", "false")])?;
    let publisher = support::publisher(&settings, None)?;
    let running = app::start(settings, publisher).await?;
    let base = format!("http://{}", running.addr);
    let http = reqwest::Client::new();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let idle = vm_rss_kb()?;
    let started = Instant::now();
    let post = |path: String, body: serde_json::Value| {
        let (http, url) = (http.clone(), format!("{base}{path}"));
        async move {
            http.post(url).json(&body).send().await?.error_for_status()?;
            anyhow::Ok(())
        }
    };
    let rooms = futures::stream::iter(0..args.memory_rooms)
        .map(|r| {
            let post = &post;
            async move {
                let room = format!("room-{r}");
                let body = json!({"command_id": format!("c-{r}"), "room_id": room, "owner_id": "owner", "title": "Live tonight"});
                post("/v1/rooms".into(), body).await?;
                for m in 0..MEMBERS {
                    let body = json!({"command_id": format!("j-{r}-{m}"), "user_id": format!("user-{r}-{m}")});
                    post(format!("/v1/rooms/{room}/join"), body).await?;
                }
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    let built = started.elapsed().as_secs_f64();
    for r in rooms {
        r?;
    }
    running.rooms.flush_delivery_marks().await;
    let loaded = vm_rss_kb()?;
    running.stop().await?;
    Ok((idle, loaded, built))
}

/// Fills the big room in SQL, starts the service, then loads the room through HTTP.
async fn one_room(args: &Args, db: &BenchDb) -> anyhow::Result<(u64, u64, f64)> {
    let repo = db.repository(1).await?;
    fill::room(repo.pool(), BIG_ROOM, args.memory_members).await?;
    repo.close().await;
    let settings = support::settings(&db.url(), None, &[("outbox_worker.enabled", "false")])?;
    let publisher = support::publisher(&settings, None)?;
    let running = app::start(settings, publisher).await?;
    let (http, base) = (reqwest::Client::new(), format!("http://{}", running.addr));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let idle = vm_rss_kb()?;
    let loaded_in = fill::check_loaded(&http, &base, BIG_ROOM, args.memory_members).await;
    let loaded = vm_rss_kb()?;
    running.stop().await?;
    Ok((idle, loaded, loaded_in?.as_secs_f64()))
}

/// `VmRSS` of this process, in kB.
fn vm_rss_kb() -> anyhow::Result<u64> {
    vm_kb("VmRSS:")
}

/// A `Vm…:` line of `/proc/self/status` (`VmRSS:` now, `VmHWM:` the peak), in kB.
fn vm_kb(field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no {field} in /proc/self/status"))
}
