//! Just enough of PromQL to know what a dashboard query or an alert expression references:
//! metric names, label matchers (and the metric they sit on), and grouping labels (`by`,
//! `without`, `on`, `ignoring`, `group_left/right`) with the metrics they apply to.
//!
//! Functions and aggregations (an identifier followed by `(`), keywords, strings, numbers,
//! ranges (`[5m]`, `[$__rate_interval]`) and Grafana variables (`$x`) are not metric names.

use std::collections::BTreeSet;

/// What one expression references.
#[derive(Debug, Default, PartialEq)]
pub struct Refs {
    /// Metric names as written (a histogram's `_bucket` series included).
    pub metrics: BTreeSet<String>,
    /// Label matchers, each on the metric it follows.
    pub matchers: Vec<LabelMatcher>,
    /// Grouping labels, each with the metrics of the expression it groups.
    pub groupings: Vec<Grouping>,
}

/// `metric{label op "value"}`.
#[derive(Debug, PartialEq)]
pub struct LabelMatcher {
    /// The metric the selector belongs to.
    pub metric: String,
    /// Label key.
    pub label: String,
    /// `=`, `!=`, `=~` or `!~`.
    pub op: String,
    /// The value or regex, unquoted.
    pub value: String,
}

/// A label in `by (...)`, `on (...)`, ... and the metrics it must exist on.
#[derive(Debug, PartialEq)]
pub struct Grouping {
    /// Label key.
    pub label: String,
    /// Metrics in the grouped expression.
    pub metrics: BTreeSet<String>,
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Op(String),
    Open(char),
    Close(char),
    Comma,
    Other,
}

const GROUPING: [&str; 6] = ["by", "without", "on", "ignoring", "group_left", "group_right"];
const KEYWORDS: [&str; 7] = ["and", "or", "unless", "bool", "offset", "inf", "nan"];

fn tokens(expr: &str) -> Vec<Tok> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '"' || c == '\'' || c == '`' {
            let mut value = String::new();
            i += 1;
            while i < chars.len() && chars[i] != c {
                if chars[i] == '\\' && c != '`' {
                    i += 1;
                }
                value.extend(chars.get(i));
                i += 1;
            }
            i += 1;
            out.push(Tok::Str(value));
        } else if c == '[' {
            // A range or subquery: durations and variables, never names.
            while i < chars.len() && chars[i] != ']' {
                i += 1;
            }
            i += 1;
        } else if c == '$' || c.is_ascii_digit() || c == '.' {
            // A Grafana variable or a number: skip it whole.
            i += 1;
            let part = |d: char| ident(d) || if c == '$' { matches!(d, '{' | '}') } else { d == '.' };
            while i < chars.len() && part(chars[i]) {
                i += 1;
            }
            out.push(Tok::Other);
        } else if ident(c) {
            let start = i;
            while i < chars.len() && ident(chars[i]) {
                i += 1;
            }
            out.push(Tok::Ident(chars[start..i].iter().collect()));
        } else if matches!(c, '(' | '{') {
            out.push(Tok::Open(c));
            i += 1;
        } else if matches!(c, ')' | '}') {
            out.push(Tok::Close(c));
            i += 1;
        } else if c == ',' {
            out.push(Tok::Comma);
            i += 1;
        } else {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            let op = if matches!(two.as_str(), "=~" | "!~" | "!=" | "==" | ">=" | "<=") {
                two
            } else {
                c.to_string()
            };
            i += op.len();
            out.push(Tok::Op(op));
        }
    }
    out
}

/// Index of the token closing the group opened at `open`.
fn closing(toks: &[Tok], open: usize) -> usize {
    let mut depth = 0;
    for (i, tok) in toks.iter().enumerate().skip(open) {
        match tok {
            Tok::Open(_) => depth += 1,
            Tok::Close(_) => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced parentheses in {toks:?}")
}

/// Index of the token opening the group closed at `close`.
fn opening(toks: &[Tok], close: usize) -> usize {
    let mut depth = 0;
    for i in (0..=close).rev() {
        match toks[i] {
            Tok::Close(_) => depth += 1,
            Tok::Open(_) => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced parentheses in {toks:?}")
}

/// Scans `expr`. Panics on a selector without a metric name (`{__name__=...}`): the checks
/// rely on every selector naming its metric.
pub fn scan(expr: &str) -> Refs {
    let toks = tokens(expr);
    let mut metric_at = vec![None; toks.len()];
    let mut refs = Refs::default();
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            // A grouping list: read below.
            Tok::Ident(name)
                if GROUPING.contains(&name.as_str()) && toks.get(i + 1) == Some(&Tok::Open('(')) =>
            {
                i = closing(&toks, i + 1);
            }
            // A function, an aggregation (`sum(`, `sum by`), a keyword.
            Tok::Ident(name)
                if KEYWORDS.contains(&name.as_str())
                    || GROUPING.contains(&name.as_str())
                    || matches!(toks.get(i + 1), Some(Tok::Open('(')))
                    || matches!(toks.get(i + 1), Some(Tok::Ident(n)) if n == "by" || n == "without") => {}
            Tok::Ident(name) => {
                metric_at[i] = Some(name.clone());
                refs.metrics.insert(name.clone());
                if toks.get(i + 1) == Some(&Tok::Open('{')) {
                    let end = closing(&toks, i + 1);
                    for matcher in toks[i + 2..end].split(|t| *t == Tok::Comma).filter(|m| !m.is_empty()) {
                        let [Tok::Ident(label), Tok::Op(op), Tok::Str(value)] = matcher else {
                            panic!("unexpected label matcher {matcher:?} in {expr}");
                        };
                        refs.matchers.push(LabelMatcher {
                            metric: name.clone(),
                            label: label.clone(),
                            op: op.clone(),
                            value: value.clone(),
                        });
                    }
                    i = end;
                }
            }
            Tok::Open('{') => panic!("a selector without a metric name in {expr}"),
            _ => {}
        }
        i += 1;
    }
    let metrics_in = |from: usize, to: usize| -> BTreeSet<String> {
        metric_at[from..=to].iter().flatten().cloned().collect()
    };
    for (i, tok) in toks.iter().enumerate() {
        let Tok::Ident(keyword) = tok else { continue };
        if !GROUPING.contains(&keyword.as_str()) || toks.get(i + 1) != Some(&Tok::Open('(')) {
            continue;
        }
        let end = closing(&toks, i + 1);
        let scope = if matches!(keyword.as_str(), "by" | "without") {
            if toks.get(end + 1) == Some(&Tok::Open('(')) {
                metrics_in(end + 1, closing(&toks, end + 1))
            } else if i > 0 && toks[i - 1] == Tok::Close(')') {
                metrics_in(opening(&toks, i - 1), i - 1)
            } else {
                panic!("cannot tell what `{keyword}` groups in {expr}")
            }
        } else {
            metrics_in(0, toks.len() - 1)
        };
        for label in &toks[i + 2..end] {
            match label {
                Tok::Ident(label) => {
                    refs.groupings.push(Grouping { label: label.clone(), metrics: scope.clone() })
                }
                Tok::Comma => {}
                other => panic!("unexpected {other:?} in a label list of {expr}"),
            }
        }
    }
    refs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_quantile_over_buckets_references_the_bucket_series_and_groups_by_le() {
        let refs =
            scan("histogram_quantile(0.95, sum by (le, path) (rate(a_seconds_bucket[$__rate_interval])))");
        assert_eq!(refs.metrics, set(&["a_seconds_bucket"]));
        let labels: Vec<_> = refs.groupings.iter().map(|g| g.label.as_str()).collect();
        assert_eq!(labels, ["le", "path"]);
        assert!(refs.groupings.iter().all(|g| g.metrics == set(&["a_seconds_bucket"])));
    }

    #[test]
    fn matchers_belong_to_their_metric_and_keywords_are_not_metrics() {
        let refs = scan(
            r#"sum(max by (status) (rows{status=~"pending|retryable"})) > 0 and on () (sum(rate(ok_total{result="delivered"}[10m])) or vector(0)) == 0"#,
        );
        assert_eq!(refs.metrics, set(&["ok_total", "rows"]));
        assert_eq!(
            refs.matchers,
            vec![
                LabelMatcher {
                    metric: "rows".into(),
                    label: "status".into(),
                    op: "=~".into(),
                    value: "pending|retryable".into()
                },
                LabelMatcher {
                    metric: "ok_total".into(),
                    label: "result".into(),
                    op: "=".into(),
                    value: "delivered".into()
                },
            ]
        );
        assert_eq!(refs.groupings, vec![Grouping { label: "status".into(), metrics: set(&["rows"]) }]);
    }

    #[test]
    fn a_trailing_by_groups_the_expression_before_it() {
        let refs = scan("sum(rate(x_total[5m])) by (route) / on (route) sum(y_total)");
        assert_eq!(refs.groupings[0], Grouping { label: "route".into(), metrics: set(&["x_total"]) });
        assert_eq!(
            refs.groupings[1],
            Grouping { label: "route".into(), metrics: set(&["x_total", "y_total"]) }
        );
    }

    #[test]
    fn route_values_with_braces_and_numbers_are_not_names() {
        let refs = scan(r#"http_requests_total{route="/v1/rooms/{room_id}/join"} * 1e3 > 0.5"#);
        assert_eq!(refs.metrics, set(&["http_requests_total"]));
        assert_eq!(refs.matchers[0].value, "/v1/rooms/{room_id}/join");
    }
}
