//! The results table: one row per figure, its baseline, the ratio and the target beside it.

/// One figure of the table.
#[derive(Debug, Clone)]
pub struct Line {
    /// Benchmark id and figure, e.g. "B1 commands/s".
    pub name: String,
    /// The measured value, formatted.
    pub value: String,
    /// What it is compared against (same invocation, same machine), formatted.
    pub baseline: String,
    /// Measured ÷ baseline (or the figure itself when there is no baseline), formatted.
    pub ratio: String,
    /// The target, formatted.
    pub target: String,
    /// Whether the target is met; `None` for context figures without a target.
    pub met: Option<bool>,
}

impl Line {
    /// A figure with a target.
    pub fn new(name: &str, value: String, baseline: String, ratio: String, target: &str, met: bool) -> Self {
        Self { name: name.into(), value, baseline, ratio, target: target.into(), met: Some(met) }
    }

    /// A context figure compared with its baseline by `ratio` (no target).
    pub fn ratio(name: &str, value: String, baseline: String, ratio: f64) -> Self {
        Self { ratio: format!("{ratio:.2}"), ..Self::info(name, value, baseline) }
    }

    /// A context figure (no target).
    pub fn info(name: &str, value: String, baseline: String) -> Self {
        Self { name: name.into(), value, baseline, ratio: String::new(), target: String::new(), met: None }
    }
}

/// Renders the lines as a Markdown table (pasted as is into `docs/BENCHMARKS.md`).
pub fn render(lines: &[Line]) -> String {
    let header = ["figure", "measured", "baseline", "ratio", "target", "met"];
    let rows: Vec<[String; 6]> = lines
        .iter()
        .map(|l| {
            let met = match l.met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "",
            };
            [
                l.name.clone(),
                l.value.clone(),
                l.baseline.clone(),
                l.ratio.clone(),
                l.target.clone(),
                met.into(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
            .collect();
        format!("| {} |\n", padded.join(" | "))
    };
    let mut out = line(header.iter().map(|s| s.to_string()).collect());
    out.push_str(&line(widths.iter().map(|w| "-".repeat(*w)).collect()));
    for row in rows {
        out.push_str(&line(row.to_vec()));
    }
    out
}
