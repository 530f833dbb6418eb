//! B10's lines: per fake latency, the hot room and the spread rooms against the same load with
//! IM off (measured once, first, in the same invocation), then the paced peak.

use std::time::Duration;

use super::figures::Im;
use super::{Mode, Outcome};
use crate::Args;
use crate::report::Line;
use crate::support::ms;

/// Target: gifts/s with IM on ÷ with IM off.
const RATIO_TARGET: f64 = 0.5;

/// A scenario's targets (the acceptance of #25 at 20 ms): the hot room is an overload (its IM
/// throughput during the load, its backlog within 20 s), the spread load must keep up (p99
/// commit → IM, backlog within 15 s).
struct Targets {
    events_per_sec: Option<f64>,
    p99: Option<Duration>,
    backlog: Duration,
}

const HOT: Targets = Targets { events_per_sec: Some(600.0), p99: None, backlog: Duration::from_secs(20) };
const SPREAD: Targets =
    Targets { events_per_sec: None, p99: Some(Duration::from_secs(3)), backlog: Duration::from_secs(15) };
/// The paced peak's p99 commit → IM.
const PACED_P99: Duration = Duration::from_secs(2);
/// The burst's backlog, IM unlimited and instant.
const BURST_BACKLOG: Duration = Duration::from_secs(15);

/// Every line of B10.
pub(crate) fn all(
    args: &Args,
    version: &str,
    off: &Mode,
    on: &[(Duration, Mode)],
    burst: &Outcome,
) -> Vec<Line> {
    let mut lines = vec![Line::info(
        "B10 binary",
        version.to_owned(),
        format!(
            "{} clients, {} s per load, {} spread rooms, {} message(s) of a room in flight",
            args.live_clients, args.live_seconds, args.live_rooms, args.live_in_flight
        ),
    )];
    for (latency, mode) in on {
        let at = format!("@ {} ms", latency.as_millis());
        let k = args.live_in_flight;
        lines.extend(scenario("hot", &at, &mode.hot, &off.hot, &HOT, k));
        lines.extend(scenario("spread", &at, &mode.spread, &off.spread, &SPREAD, k));
        if let Some(paced) = &mode.paced {
            lines.push(paced_line(args, &at, paced));
        }
    }
    lines.push(burst_line(args, burst));
    lines
}

fn rate(o: &Outcome) -> f64 {
    o.load.gifts as f64 / o.load.elapsed.as_secs_f64().max(1e-9)
}

fn answers(o: &Outcome) -> String {
    format!("{} (p99 {})", ms(o.load.http.pct(50.0)), ms(o.load.http.pct(99.0)))
}

/// How long the backlog took to go; when it outlasted the wait, the rows left and the time
/// the drain rate so far would take for them.
fn gone(o: &Outcome) -> String {
    let b = &o.backlog;
    if let Some(d) = b.gone_after {
        return format!("{:.2} s", d.as_secs_f64());
    }
    let per_sec = (b.at_end - b.left) as f64 / b.waited.as_secs_f64().max(1e-9);
    let more = if per_sec > 0.0 {
        format!("~{:.0} s more at {per_sec:.0} rows/s", b.left as f64 / per_sec)
    } else {
        "none drained".to_owned()
    };
    format!("> {:.0} s ({} of {} rows left; {more})", b.waited.as_secs_f64(), b.left, b.at_end)
}

fn cores(o: &Outcome) -> (f64, String) {
    let busy = |d: Duration| d.as_secs_f64() / o.load.elapsed.as_secs_f64().max(1e-9);
    let c = &o.cpu;
    let total = busy(c.service) + busy(c.fake) + busy(c.db) + busy(c.bench);
    let parts = format!(
        "service {:.2} + fake IM {:.2} + MariaDB {:.2} + bench {:.2}",
        busy(c.service),
        busy(c.fake),
        busy(c.db),
        busy(c.bench)
    );
    (total, parts)
}

/// A duration: ms below 10 s, seconds above.
fn time(d: Duration) -> String {
    if d < Duration::from_secs(10) { ms(d) } else { format!("{:.1} s", d.as_secs_f64()) }
}

/// Commit → IM at percentile `p`; "≥" when some gifts never reached IM during the wait.
fn commit_to_im(im: &Im, p: f64) -> String {
    format!("{}{}", if im.missing > 0 { "≥ " } else { "" }, time(im.commit_to_im.pct(p)))
}

/// What the commit → IM figures stand on.
fn over(im: &Im, gifts: usize) -> String {
    if im.missing == 0 {
        return format!("over all {gifts} gifts");
    }
    format!(
        "lower bounds: {} of {gifts} gifts not in IM at the end of the wait count until then",
        gifts - im.delivered
    )
}

/// Whether the backlog went within `bound`.
fn gone_within(o: &Outcome, bound: Duration) -> bool {
    o.backlog.gone_after.is_some_and(|d| d <= bound)
}

/// "≤ 2 s".
fn at_most(bound: Duration) -> String {
    format!("≤ {} s", bound.as_secs())
}

/// A line with a target when `target` is given (met by `met`), a context line otherwise.
fn maybe_target(name: &str, value: String, baseline: String, target: Option<(String, bool)>) -> Line {
    match target {
        Some((target, met)) => Line::new(name, value, baseline, String::new(), &target, met),
        None => Line::info(name, value, baseline),
    }
}

/// The lines of one scenario at one latency.
fn scenario(
    what: &str,
    at: &str,
    on: &Outcome,
    off: &Outcome,
    targets: &Targets,
    in_flight: usize,
) -> Vec<Line> {
    let name = |figure: &str| format!("B10 {what} {figure} {at}");
    let (rate_on, rate_off) = (rate(on), rate(off));
    let ratio = rate_on / rate_off.max(1e-9);
    let errors =
        |o: &Outcome| if o.load.errors > 0 { format!(", {} failed", o.load.errors) } else { String::new() };
    let mut lines = vec![
        Line::new(
            &name("gifts/s, IM on ÷ off"),
            format!("{rate_on:.0}/s{}", errors(on)),
            format!("{rate_off:.0}/s IM off{}", errors(off)),
            format!("{ratio:.2}"),
            "≥ 0.5",
            ratio >= RATIO_TARGET,
        ),
        Line::info(&name("gift answer p50"), answers(on), format!("{} IM off", answers(off))),
    ];
    let (busy_on, parts_on) = cores(on);
    let (busy_off, _) = cores(off);
    if let Some(im) = &on.im {
        let stats = &im.stats;
        let twice = if im.twice > 0 { format!(", {} recorded twice", im.twice) } else { String::new() };
        let mean = stats.accepted as f64 / stats.messages.max(1) as f64;
        lines.extend([
            maybe_target(
                &name("IM events/s during the load"),
                format!("{:.0}/s", im.events_per_sec),
                format!(
                    "{} of {} gifts in IM{twice}; {} answered delivered (sync)",
                    im.delivered, on.load.gifts, im.sync_delivered
                ),
                targets.events_per_sec.map(|t| (format!("≥ {t:.0}/s"), im.events_per_sec >= t)),
            ),
            Line::info(
                &name("events per call p50 / max"),
                format!("{} / {}", im.per_call.0, im.per_call.1),
                format!(
                    "{} calls carried the gifts; mean {mean:.2} over all {} accepted calls",
                    im.calls, stats.messages
                ),
            ),
            maybe_target(
                &name("commit → IM p99"),
                commit_to_im(im, 99.0),
                format!(
                    "p50 {}, max {}; {}",
                    commit_to_im(im, 50.0),
                    commit_to_im(im, 100.0),
                    over(im, on.load.gifts)
                ),
                targets.p99.map(|t| (at_most(t), im.missing == 0 && im.commit_to_im.pct(99.0) <= t)),
            ),
            Line::info(
                &name("IM calls in the busiest second"),
                im.busiest_second.to_string(),
                format!("{} in the busiest msg_time second; service 190/s, fake 200/s", im.busiest_msg_time),
            ),
        ]);
        let refusals = stats.rate_limited + stats.dropped;
        lines.push(Line::new(
            &name("IM refusals"),
            refusals.to_string(),
            format!(
                "{} refused 60007 + {} dropped (40/s per group) of {} calls; {} other FAIL answers",
                stats.rate_limited,
                stats.dropped,
                stats.calls,
                stats.rejected.saturating_sub(stats.rate_limited)
            ),
            String::new(),
            "0",
            refusals == 0,
        ));
        lines.push(order_line(&name("gifts out of room order in IM"), im, in_flight));
    }
    let backlog_target = on.im.as_ref().map(|_| (at_most(targets.backlog), gone_within(on, targets.backlog)));
    lines.extend([
        maybe_target(
            &name("backlog gone after the load"),
            gone(on),
            format!("{} undelivered at its end; IM off {}", on.backlog.at_end, gone(off)),
            backlog_target,
        ),
        Line::info(&name("cores busy"), format!("{busy_on:.2}"), format!("{parts_on}; IM off {busy_off:.2}")),
    ]);
    lines
}

/// Gifts IM took after a later version of their room: none with one message of a room in
/// flight, whatever the load; with more, how far out of order (clients reorder by version).
fn order_line(name: &str, im: &Im, in_flight: usize) -> Line {
    let detail = format!(
        "first receptions of {} gifts, in the order IM accepted them; max displacement {} versions",
        im.delivered, im.max_displacement
    );
    if in_flight > 1 {
        return Line::info(
            name,
            im.out_of_order.to_string(),
            format!("{detail}; {in_flight} in flight a room"),
        );
    }
    Line::new(name, im.out_of_order.to_string(), detail, String::new(), "0", im.out_of_order == 0)
}

/// The paced peak: the hot room at `--paced-rate` offered.
fn paced_line(args: &Args, at: &str, o: &Outcome) -> Line {
    let Some(im) = &o.im else {
        return Line::info(&format!("B10 paced peak commit → IM p99 {at}"), "n/a".into(), String::new());
    };
    let refusals = im.stats.rate_limited + im.stats.dropped;
    let in_order = args.live_in_flight > 1 || im.out_of_order == 0;
    let met = im.missing == 0 && in_order && refusals == 0 && im.commit_to_im.pct(99.0) <= PACED_P99;
    Line::new(
        &format!("B10 paced peak commit → IM p99 {at}"),
        commit_to_im(im, 99.0),
        format!(
            "{:.0}/s offered, {:.0}/s answered, {} of {} in IM; p50 {} ({}); per call p50 {} max {}; \
             backlog gone {}; {refusals} refusals; {} out of room order",
            args.paced_rate,
            rate(o),
            im.delivered,
            o.load.gifts,
            commit_to_im(im, 50.0),
            over(im, o.load.gifts),
            im.per_call.0,
            im.per_call.1,
            gone(o),
            im.out_of_order
        ),
        String::new(),
        &format!("{}, in order, 0 refusals", at_most(PACED_P99)),
        met,
    )
}

/// The burst: the hot room for `--burst-seconds`, IM unlimited and instant.
fn burst_line(args: &Args, o: &Outcome) -> Line {
    let name = "B10 burst backlog gone after the load (IM unlimited, 0 ms)";
    let Some(im) = &o.im else {
        return Line::info(name, "n/a".into(), String::new());
    };
    let in_order = args.live_in_flight > 1 || im.out_of_order == 0;
    let met = gone_within(o, BURST_BACKLOG) && im.missing == 0 && in_order;
    Line::new(
        name,
        gone(o),
        format!(
            "{} gifts in {} s ({:.0}/s), {} undelivered at its end; {} calls, per call p50 {} max {}; \
             {} out of room order",
            o.load.gifts,
            args.burst_seconds,
            rate(o),
            o.backlog.at_end,
            im.calls,
            im.per_call.0,
            im.per_call.1,
            im.out_of_order
        ),
        String::new(),
        &format!("{}, in order", at_most(BURST_BACKLOG)),
        met,
    )
}
