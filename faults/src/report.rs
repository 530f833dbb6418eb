//! A row's result, the promises it is held to, and the Markdown table.

use std::time::Duration;

use crate::check::CheckReport;
use crate::load::LoadReport;
use crate::support::secs;

/// What one row measured.
#[derive(Debug, Default)]
pub struct RowResult {
    /// Row number of the issue (1, 2, 4, 7; 11-13 on Galera).
    pub id: u8,
    /// The fault, in a few words.
    pub fault: String,
    /// What the clients saw.
    pub load: LoadReport,
    /// The three-way check (absent when the row could not run to it).
    pub check: Option<CheckReport>,
    /// Fault end → first acknowledged command (or the row's own measure, see notes).
    pub recovery: Option<Duration>,
    /// No answer may take longer.
    pub latency_bound: Duration,
    /// No event may reach IM more often.
    pub sends_bound: u32,
    /// When the row knows them, the events in flight at the fault: no more may be duplicated.
    pub in_flight: Option<u64>,
    /// Panic lines in the services' logs.
    pub panics: usize,
    /// The largest resident memory of a service process seen during the row.
    pub rss_mb: f64,
    /// Wall time of the row (set by the runner).
    pub elapsed: Duration,
    /// Figures and observations printed under the table.
    pub notes: Vec<String>,
    /// Promises the row's own checks found broken (beyond the common ones).
    pub failures: Vec<String>,
}

impl RowResult {
    /// A row about to run `fault`, bounding its answers' latency and each event's sends to IM.
    pub fn new(id: u8, fault: impl Into<String>, latency_bound: Duration, sends_bound: u32) -> Self {
        Self { id, fault: fault.into(), latency_bound, sends_bound, ..Self::default() }
    }

    /// A row that could not run: `error` is its only broken promise.
    pub fn error(id: u8, fault: &str, error: &anyhow::Error) -> Self {
        Self {
            id,
            fault: fault.into(),
            failures: vec![format!("the row could not run: {error:#}")],
            ..Self::default()
        }
    }

    /// Every promise this row breaks (empty when it holds).
    pub fn broken(&self) -> Vec<String> {
        let mut broken = self.failures.clone();
        let load = &self.load;
        if self.failures.is_empty() && load.acked.is_empty() {
            broken.push("no command was acknowledged: the row proves nothing".into());
        }
        if load.other_5xx() > 0 {
            broken.push(format!("{} answers were a 5xx other than 503", load.other_5xx()));
        }
        if load.unexpected_count > 0 {
            broken.push(format!("{} unexpected answers: {:?}", load.unexpected_count, load.unexpected));
        }
        if load.hung > 0 {
            broken.push(format!("{} requests hung past the client timeout", load.hung));
        }
        if load.max_latency > self.latency_bound {
            broken.push(format!(
                "an answer took {} (bound {})",
                secs(load.max_latency),
                secs(self.latency_bound)
            ));
        }
        if self.panics > 0 {
            broken.push(format!("{} panic lines in the service logs", self.panics));
        }
        if let Some(check) = &self.check {
            if check.lost() > 0 {
                broken.push(format!("{} lost: {:?}", check.lost(), check.examples));
            }
            if check.unexpected > 0 {
                broken.push(format!("{} messages IM received are in no outbox row", check.unexpected));
            }
            if check.out_of_order > 0 {
                broken.push(format!(
                    "{} events reached IM after a later event of their room",
                    check.out_of_order
                ));
            }
            if check.max_sends > self.sends_bound {
                broken.push(format!(
                    "an event reached IM {} times (bound {})",
                    check.max_sends, self.sends_bound
                ));
            }
            if let Some(in_flight) = self.in_flight.filter(|n| check.duplicated > *n) {
                broken.push(format!(
                    "{} events duplicated, more than the {in_flight} in flight at the fault",
                    check.duplicated
                ));
            }
            if check.undelivered > 0 {
                broken.push(format!(
                    "{} outbox rows not delivered after {} ({} delivering)",
                    check.undelivered,
                    secs(check.drain),
                    check.delivering
                ));
            }
        }
        broken
    }
}

/// The table, one line per row.
pub fn render(rows: &[RowResult]) -> String {
    let header = [
        "row",
        "fault",
        "acked",
        "503s",
        "other 5xx",
        "lost",
        "duplicated (max sends / bound)",
        "unexpected",
        "recovery",
        "max latency (bound)",
        "panics",
        "RSS MB",
        "time",
        "promises",
    ];
    let lines: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let (lost, duplicated, unexpected) = match &r.check {
                Some(c) => (
                    c.lost().to_string(),
                    match r.in_flight {
                        Some(n) => {
                            format!("{} ≤ {n} in flight ({} / {})", c.duplicated, c.max_sends, r.sends_bound)
                        }
                        None => format!("{} ({} / {})", c.duplicated, c.max_sends, r.sends_bound),
                    },
                    c.unexpected.to_string(),
                ),
                None => ("?".into(), "?".into(), "?".into()),
            };
            let latency = if r.load.hung > 0 {
                format!("hung ×{} ({})", r.load.hung, secs(r.latency_bound))
            } else {
                format!("{} ({})", secs(r.load.max_latency), secs(r.latency_bound))
            };
            vec![
                r.id.to_string(),
                r.fault.clone(),
                r.load.acked.len().to_string(),
                r.load.count(503).to_string(),
                r.load.other_5xx().to_string(),
                lost,
                duplicated,
                unexpected,
                r.recovery.map(secs).unwrap_or_else(|| "-".into()),
                latency,
                r.panics.to_string(),
                format!("{:.0}", r.rss_mb),
                secs(r.elapsed),
                if r.broken().is_empty() { "kept".into() } else { "**broken**".into() },
            ]
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for line in &lines {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let format_line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
            .collect();
        format!("| {} |\n", padded.join(" | "))
    };
    let mut out = format_line(&header.map(String::from));
    out.push_str(&format_line(&widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>()));
    for line in &lines {
        out.push_str(&format_line(line));
    }
    out
}

/// The notes under the table: each row's figures and, when it breaks any, its promises.
pub fn notes(rows: &[RowResult]) -> String {
    let mut out = String::new();
    for r in rows {
        for note in &r.notes {
            out.push_str(&format!("- row {}: {note}\n", r.id));
        }
        if let Some(c) = &r.check {
            out.push_str(&format!(
                "- row {}: {} commands logged, {} outbox rows, drained {} after the load, {} events out of room order at IM; 503s by code {:?}; {} transport errors, {} commands given up\n",
                r.id,
                c.logged_commands,
                c.outbox_rows,
                secs(c.drain),
                c.out_of_order,
                r.load.unavailable,
                r.load.transport_errors,
                r.load.given_up
            ));
        }
        for broken in r.broken() {
            out.push_str(&format!("- row {}: **BROKEN**: {broken}\n", r.id));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept() -> RowResult {
        let mut row = RowResult {
            id: 1,
            fault: "f".into(),
            latency_bound: Duration::from_secs(10),
            sends_bound: 2,
            check: Some(CheckReport::default()),
            ..RowResult::default()
        };
        row.load.acked.insert("c1".into(), vec!["e1".into()]);
        row.load.statuses.insert(200, 1);
        row
    }

    #[test]
    fn a_clean_row_keeps_its_promises_and_each_breach_is_named() {
        assert!(kept().broken().is_empty(), "{:?}", kept().broken());
        type Breach = fn(&mut RowResult);
        let breaches: [(&str, Breach); 9] = [
            ("lost", |r| r.check.as_mut().unwrap().lost_in_delivery = 1),
            ("room", |r| r.check.as_mut().unwrap().out_of_order = 1),
            ("outbox row", |r| r.check.as_mut().unwrap().unexpected = 1),
            ("3 times", |r| r.check.as_mut().unwrap().max_sends = 3),
            ("other than 503", |r| _ = r.load.statuses.insert(500, 1)),
            ("took", |r| r.load.max_latency = Duration::from_secs(11)),
            ("hung", |r| r.load.hung = 1),
            ("panic", |r| r.panics = 1),
            ("in flight", |r| {
                r.in_flight = Some(1);
                r.check.as_mut().unwrap().duplicated = 2;
            }),
        ];
        for (words, breach) in breaches {
            let mut row = kept();
            breach(&mut row);
            let broken = row.broken();
            assert!(broken.len() == 1 && broken[0].contains(words), "{words}: {broken:?}");
        }
        let mut empty = kept();
        empty.load.acked.clear();
        assert_eq!(empty.broken().len(), 1);
        // 503s are the documented answer to an outage, not a breach.
        let mut unavailable = kept();
        unavailable.load.statuses.insert(503, 7);
        assert!(unavailable.broken().is_empty());
    }

    #[test]
    fn the_table_has_a_line_per_row() {
        let table = render(&[kept(), RowResult::error(4, "x", &anyhow::anyhow!("boom"))]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4, "{table}");
        assert!(lines[2].contains("| kept") && lines[3].contains("**broken**"), "{table}");
        assert!(notes(&[RowResult::error(4, "x", &anyhow::anyhow!("boom"))]).contains("boom"));
    }
}
