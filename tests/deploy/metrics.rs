//! Metrics and PromQL: the metrics the suite exports, the metric names a PromQL expression
//! selects, and the Grafana dashboard's panels.

use crate::common::{array_at, deploy, json_file};
use serde_json::Value;
use std::collections::BTreeSet;

/// Every metric the suite exports, by kind. Dashboards may query these and nothing else;
/// `every_allow_listed_metric_is_exported_by_the_source` keeps the list honest.
pub(crate) const METRICS: &[(&str, MetricKind)] = &[
    // crates/store/src/metrics.rs, served by the reconciler
    ("opledger_operations", MetricKind::Gauge),
    ("opledger_oldest_unresolved_seconds", MetricKind::Gauge),
    ("opledger_oldest_waiting_seconds", MetricKind::Gauge),
    ("opledger_escalations", MetricKind::Gauge),
    ("opledger_open_escalations", MetricKind::Gauge),
    ("opledger_reopened_releases", MetricKind::Gauge),
    // the broadcaster
    ("opledger_submissions_total", MetricKind::Counter),
    // every gRPC service
    ("opledger_grpc_requests_total", MetricKind::Counter),
    (
        "opledger_grpc_request_duration_seconds",
        MetricKind::Histogram,
    ),
    // the inbox
    ("opledger_inbox_requests_total", MetricKind::Counter),
    ("opledger_inbox_quarantined_total", MetricKind::Counter),
    ("opledger_inbox_unhandled_total", MetricKind::Counter),
    ("opledger_inbox_pending", MetricKind::Gauge),
    ("opledger_inbox_parked", MetricKind::Gauge),
    ("opledger_inbox_dead_letters", MetricKind::Gauge),
    ("opledger_inbox_open_quarantines", MetricKind::Gauge),
    ("opledger_inbox_open_unhandled", MetricKind::Gauge),
    (
        "opledger_inbox_oldest_unresolved_seconds",
        MetricKind::Gauge,
    ),
    // the witness (services/witness/src/metrics.rs)
    (
        "opledger_witness_oldest_unwitnessed_seconds",
        MetricKind::Gauge,
    ),
    ("opledger_witness_examined_total", MetricKind::Counter),
    (
        "opledger_witness_oldest_unwitnessed_credit_seconds",
        MetricKind::Gauge,
    ),
    (
        "opledger_witness_credits_examined_total",
        MetricKind::Counter,
    ),
    // the custodian executor (services/custodian/src/metrics.rs)
    (
        "opledger_custodian_oldest_in_flight_seconds",
        MetricKind::Gauge,
    ),
    ("opledger_custodian_in_flight", MetricKind::Gauge),
    ("opledger_custodian_open_escalations", MetricKind::Gauge),
    // every service that reads chain evidence (crates/chain/src/evidence/settings.rs)
    ("opledger_evidence_no_verdict_total", MetricKind::Counter),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MetricKind {
    Counter,
    Gauge,
    Histogram,
}

/// PromQL operators and modifiers that look like names.
const PROMQL_WORDS: &[&str] = &["and", "or", "unless", "bool", "offset", "inf", "nan"];
/// Aggregations, which may be followed by `by (...)` instead of their argument.
const AGGREGATIONS: &[&str] = &[
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "topk", "bottomk",
];

/// Metric names a PromQL expression selects (label matchers, ranges, strings, grouping clauses
/// and function names removed).
pub(crate) fn promql_metrics(expr: &str) -> BTreeSet<String> {
    // Blank out {...}, [...] and "...".
    let mut plain = String::new();
    let mut closing: Option<char> = None;
    for c in expr.chars() {
        match closing {
            Some(end) if c == end => closing = None,
            Some(_) => {}
            None => match c {
                '{' => closing = Some('}'),
                '[' => closing = Some(']'),
                '"' => closing = Some('"'),
                _ => plain.push(c),
            },
        }
    }
    let chars: Vec<char> = plain.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    let mut skip_group = false;
    while i < chars.len() {
        let c = chars[i];
        if !(c.is_ascii_alphabetic() || c == '_' || c == ':') {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len()
            && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
        {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        let next = chars[i..].iter().find(|c| !c.is_whitespace()).copied();
        if [
            "by",
            "without",
            "on",
            "ignoring",
            "group_left",
            "group_right",
        ]
        .contains(&word.as_str())
        {
            skip_group = next == Some('(');
            continue;
        }
        if skip_group {
            // Inside `by (...)`: labels, not metrics.
            if let Some(close) = chars[i..].iter().position(|c| *c == ')') {
                i += close + 1;
            }
            skip_group = false;
            continue;
        }
        let keyword =
            PROMQL_WORDS.contains(&word.as_str()) || AGGREGATIONS.contains(&word.as_str());
        if next != Some('(') && !keyword {
            names.insert(word);
        }
    }
    names
}

/// The metric of a Grafana `label_values(metric, label)` variable query, if it is one.
pub(crate) fn label_values_metric(query: &str) -> Option<BTreeSet<String>> {
    let inner = query
        .trim()
        .strip_prefix("label_values(")?
        .strip_suffix(')')?;
    let selector = inner.rsplit_once(',').map_or(inner, |(s, _)| s);
    Some(promql_metrics(selector))
}

pub(crate) fn allowed_metric(name: &str) -> bool {
    METRICS.iter().any(|(metric, kind)| match kind {
        MetricKind::Histogram => ["_bucket", "_sum", "_count"]
            .iter()
            .any(|suffix| name.strip_suffix(suffix) == Some(metric)),
        _ => name == *metric,
    })
}

/// Every panel of a dashboard, rows' nested panels included.
pub(crate) fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for panel in array_at(dashboard, "/panels") {
        out.push(panel);
        out.extend(array_at(panel, "/panels"));
    }
    out
}

pub(crate) fn dashboard() -> Value {
    json_file(&deploy().join("grafana/opledger.json"))
}
