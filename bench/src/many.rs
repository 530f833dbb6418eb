//! B8, many nodes: commands per second with 3 cluster nodes in this process against 1 node
//! with the cluster off, on the same MariaDB database, B1's load (fake IM at 0 ms, the rate
//! limiter not binding) with every request sent to a node picked at random — so about 2/3 of
//! them are forwarded once to their room's owner, and every commit is fenced on its shard's
//! lease. Then the forward hop alone: one client, the same `GET /v1/rooms/{id}` sent to the
//! owner and to a node that is not (one hop), interleaved, and what the hop adds at p50 and
//! p99.
//!
//! All nodes share the 2 cores with MariaDB, Redis, the fake IM and the load generator, so
//! 3 nodes cannot scale up here: the figure is the cost of forwarding and fencing, measured.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::future::join_all;
use sqlx::mysql::{MySqlPool, MySqlPoolOptions};

use crate::Args;
use crate::command::{NOT_BINDING, POOL, Plan, Run, client_rooms, plan, request, truncate};
use crate::many_hop::hop_latency;
use crate::many_nodes::{Nodes, owners};
use crate::report::Line;
use crate::support::{self, BenchDb, CpuTimes, Samples, global_status, ms};

/// Nodes of the cluster run.
const NODES: usize = 3;

/// Server-wide statement counters read around each timed run.
const COUNTERS: [&str; 4] = ["Com_commit", "Com_insert", "Com_update", "Com_select"];

/// What one timed load measured.
struct Load {
    run: Run,
    /// Timed requests sent to a node that does not own their room.
    forwarded: usize,
    /// Server-wide commits, inserts, updates and selects during the timed commands (in the
    /// order of [`COUNTERS`]).
    statements: [i64; 4],
    /// Delivery-mark statements of all nodes during the timed commands (each node marks its
    /// own commands, batched on its own clock).
    marks: u64,
}

/// Runs B8 on the fresh database `db` and returns its lines.
pub async fn run(args: &Args, db: &BenchDb) -> anyhow::Result<Vec<Line>> {
    let plans: Vec<Plan> = (0..args.clients).map(|c| plan(args, c)).collect();
    let im = support::fake_im(Duration::ZERO).await?;
    let pool = POOL.to_string();
    let mut overrides = vec![("database.max_connections", pool.as_str())];
    overrides.extend_from_slice(&NOT_BINDING);

    // Baseline: one node, the cluster off (it also creates the schema).
    let single = Nodes::single(&db.url(), &im, &overrides).await?;
    let status = MySqlPoolOptions::new().max_connections(1).connect(&db.url()).await?;
    let one = load(args, &single, plans.clone(), &status, &HashMap::new()).await;
    single.stop().await;
    let one = one?;
    truncate(&status).await?;

    // Three cluster nodes on the same database, each request to a random node.
    let nodes = Nodes::cluster(&db.url(), &im, NODES, &overrides, &status).await?;
    let measured = async {
        let rooms = (0..args.rooms.max(args.clients)).map(|r| format!("r{r}"));
        let owner = owners(&status, &nodes.ids, rooms).await?;
        let three = load(args, &nodes, plans, &status, &owner).await?;
        let hop = hop_latency(&nodes.bases, &owner, args.hop_samples).await?;
        anyhow::Ok((three, hop, owner))
    }
    .await;
    let settled_in = nodes.settled_in.unwrap_or_default();
    nodes.stop().await;
    status.close().await;
    let (three, (direct, hopped), owner) = measured?;
    Ok(lines(args, &one, &three, &owner, settled_in, &direct, &hopped))
}

/// Creates the rooms, then runs every client's timed commands one after another, each request
/// to a node picked at random; `owner` names each room's owner (empty: one node, no hop).
async fn load(
    args: &Args,
    nodes: &Nodes,
    plans: Vec<Plan>,
    status: &MySqlPool,
    owner: &HashMap<String, usize>,
) -> anyhow::Result<Load> {
    let http = reqwest::Client::new();
    let pick = || rand::random_range(0..nodes.bases.len());
    let post = |node: usize, path: String, body: serde_json::Value| {
        crate::support::post_ok(http.clone(), format!("{}{path}", nodes.bases[node]), body)
    };
    for (client, (creates, _)) in plans.iter().enumerate() {
        for (room, command) in client_rooms(args, client).zip(creates) {
            let (path, body) = request(&format!("r{room}"), &format!("create-{room}"), command);
            post(pick(), path, body).await?;
        }
    }
    let (before, marks) = (global_status(status, &COUNTERS).await?, nodes.mark_statements());
    let (started, cpu) = (Instant::now(), CpuTimes::now());
    let results = join_all(plans.into_iter().enumerate().map(|(client, (_, timed))| {
        let post = &post;
        async move {
            let (mut samples, mut forwarded) = (Samples::default(), 0);
            for (n, (room, command)) in timed.iter().enumerate() {
                let (path, body) = request(room, &format!("b8-{client}-{n}"), command);
                let node = pick();
                forwarded += usize::from(owner.get(room).is_some_and(|&o| o != node));
                let t = Instant::now();
                post(node, path, body).await?;
                samples.push(t.elapsed());
            }
            anyhow::Ok((samples, forwarded))
        }
    }))
    .await;
    let mut forwarded = 0;
    let results = results
        .into_iter()
        .map(|r| {
            r.map(|(samples, f)| {
                forwarded += f;
                samples
            })
        })
        .collect();
    let run = Run::collect(started, cpu, results)?;
    let after = global_status(status, &COUNTERS).await?;
    let statements = COUNTERS.map(|c| after.get(c).unwrap_or(&0) - before.get(c).unwrap_or(&0));
    let marks = nodes.mark_statements().saturating_sub(marks);
    Ok(Load { run, forwarded, statements, marks })
}

fn lines(
    args: &Args,
    one: &Load,
    three: &Load,
    owner: &HashMap<String, usize>,
    settled_in: Duration,
    direct: &Samples,
    hopped: &Samples,
) -> Vec<Line> {
    let rate = |l: &Load| l.run.n as f64 / l.run.elapsed.as_secs_f64();
    let (r1, r3) = (rate(one), rate(three));
    let per = |cpu: Duration, l: &Load| format!("{:.0} µs", cpu.as_secs_f64() * 1e6 / l.run.n.max(1) as f64);
    let busy = |l: &Load| {
        let c = &l.run.cpu;
        (c.this + c.db + c.redis).as_secs_f64() / l.run.elapsed.as_secs_f64()
    };
    let statements = |l: &Load| {
        let per = l.statements.map(|s| s as f64 / l.run.n.max(1) as f64);
        let [commit, insert, update, select] = per;
        format!(
            "{:.2} ({commit:.2} commit, {insert:.2} insert, {update:.2} update, {select:.2} select)",
            per.iter().sum::<f64>()
        )
    };
    let pcts = |s: &Samples| format!("{} / {}", ms(s.pct(50.0)), ms(s.pct(99.0)));
    let mut rooms_at = [0usize; NODES];
    for &o in owner.values() {
        rooms_at[o.min(NODES - 1)] += 1;
    }
    // Signed: with few samples the owner's tail may be the slower one.
    let added = |p: f64| (hopped.pct(p).as_secs_f64() - direct.pct(p).as_secs_f64()) * 1000.0;
    let added_p99 = added(99.0);
    let shape = format!("{} clients, {} rooms, {} commands", args.clients, owner.len(), three.run.n);
    vec![
        Line {
            name: "B8 commands/s (3 nodes ÷ 1 node)".into(),
            value: format!("{r3:.0}/s"),
            baseline: format!("{r1:.0}/s 1 node, cluster off; {shape}"),
            ratio: format!("{:.2}", r3 / r1),
            target: "(2 cores: no scale-up possible)".into(),
            met: None,
        },
        Line::info("B8 p50 / p99", pcts(&three.run.samples), format!("{} 1 node", pcts(&one.run.samples))),
        Line::info(
            "B8 requests forwarded",
            format!(
                "{:.1}% ({} of {})",
                three.forwarded as f64 * 100.0 / three.run.n.max(1) as f64,
                three.forwarded,
                three.run.n
            ),
            format!("each to a random node of {NODES}; rooms per owner {rooms_at:?}"),
        ),
        Line::info(
            "B8 CPU/command: bench process",
            per(three.run.cpu.this, three),
            format!("{} 1 node (all nodes, fake IM and HTTP client share it)", per(one.run.cpu.this, one)),
        ),
        Line::info(
            "B8 CPU/command: MariaDB / Redis",
            format!("{} / {}", per(three.run.cpu.db, three), per(three.run.cpu.redis, three)),
            format!("{} / {} 1 node", per(one.run.cpu.db, one), per(one.run.cpu.redis, one)),
        ),
        Line::info(
            "B8 cores busy (of 2)",
            format!("{:.2}", busy(three)),
            format!("{:.2} 1 node (bench + MariaDB + Redis)", busy(one)),
        ),
        Line::info(
            "B8 DB statements/command",
            statements(three),
            format!("{} 1 node (server-wide)", statements(one)),
        ),
        Line::info(
            "B8 mark statements/command",
            format!("{:.3}", three.marks as f64 / three.run.n.max(1) as f64),
            format!("{:.3} 1 node (one marker per node)", one.marks as f64 / one.run.n.max(1) as f64),
        ),
        Line::info(
            "B8 shards settled",
            format!("{:.1} s", settled_in.as_secs_f64()),
            format!("first start → all 1024 at their preferred node, {NODES} nodes started in turn"),
        ),
        Line::new(
            "B8 forward hop adds, p99",
            format!("{added_p99:.2} ms"),
            format!(
                "{} via a non-owner, {} at the owner; {} each",
                ms(hopped.pct(99.0)),
                ms(direct.pct(99.0)),
                direct.len()
            ),
            String::new(),
            "≤ 2 ms (loopback)",
            added_p99 <= 2.0,
        ),
        Line::info(
            "B8 forward hop adds, p50",
            format!("{:.2} ms", added(50.0)),
            format!(
                "{} via a non-owner, {} at the owner (GET /v1/rooms/{{id}}, one client)",
                ms(hopped.pct(50.0)),
                ms(direct.pct(50.0))
            ),
        ),
    ]
}
