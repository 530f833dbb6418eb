//! Reads the Prometheus text exposition `/metrics` serves: series by name, with their labels
//! and values.

use std::collections::{BTreeMap, BTreeSet};

/// One sample line.
#[derive(Debug)]
pub struct Series {
    /// Label pairs.
    pub labels: BTreeMap<String, String>,
    /// The value.
    pub value: f64,
}

/// Every sample of one scrape, by series name (`x_bucket`, `x_sum`, `x_count` apart).
#[derive(Debug)]
pub struct Exposition(BTreeMap<String, Vec<Series>>);

impl Exposition {
    /// Parses the text format; panics on a line it cannot read.
    pub fn parse(text: &str) -> Exposition {
        let mut series: BTreeMap<String, Vec<Series>> = BTreeMap::new();
        for line in text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
            let name_end = line.find(['{', ' ']).unwrap_or_else(|| panic!("no value in {line:?}"));
            let name = &line[..name_end];
            let mut labels = BTreeMap::new();
            let mut rest = &line[name_end..];
            if let Some(body) = rest.strip_prefix('{') {
                rest = parse_labels(body, &mut labels).unwrap_or_else(|| panic!("bad labels in {line:?}"));
            }
            let value = rest.split_whitespace().next().unwrap_or_default();
            let value = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v.parse().unwrap_or_else(|_| panic!("bad value in {line:?}")),
            };
            series.entry(name.to_owned()).or_default().push(Series { labels, value });
        }
        Exposition(series)
    }

    /// Whether a series of that name is exported.
    pub fn has(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// Every series name.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// Label keys found on any series of `name`.
    pub fn label_keys(&self, name: &str) -> BTreeSet<&str> {
        self.0.get(name).into_iter().flatten().flat_map(|s| s.labels.keys().map(String::as_str)).collect()
    }

    /// Whether some series of `name` has `label="value"`.
    pub fn has_label_value(&self, name: &str, label: &str, value: &str) -> bool {
        self.0.get(name).into_iter().flatten().any(|s| s.labels.get(label).is_some_and(|v| v == value))
    }

    /// Sum of the series of `name` whose labels include every pair of `filter` (0 if none).
    pub fn sum(&self, name: &str, filter: &[(&str, &str)]) -> f64 {
        self.0
            .get(name)
            .into_iter()
            .flatten()
            .filter(|s| filter.iter().all(|(k, v)| s.labels.get(*k).is_some_and(|x| x == v)))
            .map(|s| s.value)
            .sum()
    }
}

/// Reads `k="v",...}` into `labels`; returns what follows the `}`.
fn parse_labels<'a>(mut body: &'a str, labels: &mut BTreeMap<String, String>) -> Option<&'a str> {
    loop {
        body = body.trim_start_matches(',');
        if let Some(rest) = body.strip_prefix('}') {
            return Some(rest);
        }
        let (key, rest) = body.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next()? {
                (_, '\\') => match chars.next()? {
                    (_, 'n') => value.push('\n'),
                    (_, c) => value.push(c),
                },
                (i, '"') => break i,
                (_, c) => value.push(c),
            }
        };
        labels.insert(key.to_owned(), value);
        body = &rest[end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_names_labels_with_braces_and_quotes_and_values() {
        let text = "# HELP x_total help\n# TYPE x_total counter\n\
            x_total{route=\"/v1/rooms/{room_id}/join\",status=\"4xx\"} 3\n\
            x_total{route=\"/a\\\"b\",status=\"2xx\"} 4\n\
            y_bucket{le=\"+Inf\"} 2\nz 1.5\n";
        let exposition = Exposition::parse(text);
        assert_eq!(exposition.label_keys("x_total"), BTreeSet::from(["route", "status"]));
        assert!(exposition.has_label_value("x_total", "route", "/v1/rooms/{room_id}/join"));
        assert!(exposition.has_label_value("x_total", "route", "/a\"b"));
        assert_eq!(exposition.sum("x_total", &[]), 7.0);
        assert_eq!(exposition.sum("x_total", &[("status", "4xx")]), 3.0);
        assert!(exposition.has("y_bucket") && exposition.has("z") && !exposition.has("y"));
        assert_eq!(exposition.sum("z", &[]), 1.5);
    }
}
