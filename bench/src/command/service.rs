//! The service side of B1: the commands over HTTP against the in-process service.

use super::*;

/// The service over HTTP: every client posts its commands one after another, each with its
/// user's bearer token when `tokens` are given.
pub(crate) async fn run_service(
    base: &str,
    plans: Vec<Plan>,
    args: &Args,
    status: &MySqlPool,
    tokens: Option<&Tokens>,
) -> anyhow::Result<(Run, i64)> {
    let http = reqwest::Client::new();
    let post = |path: String, body: serde_json::Value, command: &Command| {
        let token = tokens.and_then(|t| t.of(super::auth::actor(command))).map(str::to_owned);
        crate::support::post_ok_as(http.clone(), format!("{base}{path}"), body, token)
    };
    for (client, (creates, _)) in plans.iter().enumerate() {
        let rooms = (client..args.rooms.max(args.clients)).step_by(args.clients);
        for (room, command) in rooms.zip(creates) {
            let (path, body) = request(&format!("r{room}"), &format!("create-{room}"), command);
            post(path, body, command).await?;
        }
    }
    let before = global_status(status, &COUNTERS).await?;
    let (started, cpu) = (Instant::now(), CpuTimes::now());
    let results = join_all(plans.into_iter().enumerate().map(|(client, (_, timed))| {
        let post = &post;
        async move {
            let mut samples = Samples::default();
            for (n, (room, command)) in timed.iter().enumerate() {
                let (path, body) = request(room, &format!("svc-{client}-{n}"), command);
                let t = Instant::now();
                post(path, body, command).await?;
                samples.push(t.elapsed());
            }
            anyhow::Ok(samples)
        }
    }))
    .await;
    let run = Run::collect(started, cpu, results)?;
    let after = global_status(status, &COUNTERS).await?;
    let statements =
        COUNTERS.iter().map(|c| after.get(*c).unwrap_or(&0) - before.get(*c).unwrap_or(&0)).sum();
    Ok((run, statements))
}

/// What a timed service run measured.
pub(super) struct ServiceRun {
    pub(super) run: Run,
    /// Delivery-mark statements (the marker's count).
    pub(super) marks: u64,
    /// Server-wide commits, inserts, updates and selects during the timed commands.
    pub(super) statements: i64,
    /// IM-bound events IM accepted from the synchronous path by the end of the timed part.
    pub(super) sync_accepted: usize,
    /// IM-bound events the commands produced.
    pub(super) im_events: i64,
}

/// Starts the service with `overrides`, runs the plans (creates, then the timed commands,
/// with `tokens` when given), stops it and empties the tables.
pub(super) async fn service_run(
    args: &Args,
    db: &BenchDb,
    plans: Vec<Plan>,
    overrides: &[(&str, &str)],
    tokens: Option<&Tokens>,
) -> anyhow::Result<ServiceRun> {
    let im = support::fake_im(Duration::ZERO).await?;
    let pool = POOL.to_string();
    let mut all = vec![("database.max_connections", pool.as_str())];
    all.extend_from_slice(overrides);
    let settings = support::settings(&db.url(), Some(&im), &all)?;
    let seen: Acceptances = Acceptances::default();
    let publisher = support::publisher(&settings, Some(seen.clone()))?;
    let status = sqlx::mysql::MySqlPoolOptions::new().max_connections(1).connect(&db.url()).await?;
    let running = app::start(settings, publisher).await?;
    let rooms = running.rooms.clone();
    let base = format!("http://{}", running.addr);
    let measured = run_service(&base, plans, args, &status, tokens).await;
    let sync_accepted = {
        let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.values().filter(|(path, _)| *path == PublishPath::Sync).count()
    };
    let marks = rooms.delivery_marker_stats().statements;
    running.stop().await?;
    drop(im);
    let mut count = QueryBuilder::<MySql>::new("SELECT COUNT(*) FROM room_outbox WHERE event_type NOT IN ");
    count.push_tuples(room_service::domain::EventType::im_skipped(), |mut t, name| {
        t.push_bind(name);
    });
    let im_events: i64 = count.build_query_scalar().fetch_one(&status).await?;
    truncate(&status).await?;
    status.close().await;
    let (run, statements) = measured?;
    Ok(ServiceRun { run, marks, statements, sync_accepted, im_events })
}
