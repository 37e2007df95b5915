//! Prometheus and Grafana: scrape targets, alert rules and their runbook sections and promtool
//! cases, dashboard queries and datasources, and the metric allow-list against the source.

use crate::common::{
    SERVICES, array_at, assert_none, deploy, files_under, read, repo, str_at, strings, yaml_doc,
};
use crate::compose_file::compose;
use crate::metrics::{
    METRICS, MetricKind, allowed_metric, dashboard, label_values_metric, panels, promql_metrics,
};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

#[test]
fn prometheus_scrapes_every_services_metrics_port_and_loads_the_alert_rules() {
    let dir = deploy().join("prometheus");
    let config = yaml_doc(&dir.join("prometheus.yml"));
    let targets: BTreeSet<String> = array_at(&config, "/scrape_configs")
        .iter()
        .flat_map(|job| array_at(job, "/static_configs"))
        .flat_map(|s| strings(&s["targets"]))
        .collect();
    let expected: BTreeSet<String> = SERVICES
        .iter()
        .map(|s| format!("{}:{}", s.name, s.metrics))
        .collect();
    assert_eq!(targets, expected);
    let rules = strings(&config["rule_files"]);
    assert!(rules.contains(&"alerts.yml".to_owned()), "{rules:?}");
    for rule in rules {
        assert!(dir.join(&rule).is_file(), "{rule}");
    }
    // compose mounts this folder where the command looks for the file.
    let compose = compose();
    let prometheus = &compose["services"]["prometheus"];
    assert!(
        strings(&prometheus["volumes"]).contains(&"../prometheus:/etc/prometheus:ro".to_owned())
    );
    assert!(
        strings(&prometheus["command"])
            .contains(&"--config.file=/etc/prometheus/prometheus.yml".to_owned())
    );
}

/// GitHub's anchor of a Markdown heading: lowercase, punctuation but `-` and `_` dropped, spaces
/// as `-`.
fn heading_anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every alerting rule of `deploy/prometheus/alerts.yml`.
fn alert_rules() -> Vec<Value> {
    let rules = yaml_doc(&deploy().join("prometheus/alerts.yml"));
    array_at(&rules, "/groups")
        .iter()
        .flat_map(|group| array_at(group, "/rules"))
        .filter(|rule| rule.get("alert").is_some())
        .cloned()
        .collect()
}

#[test]
fn every_alert_reads_exported_metrics_names_its_owner_and_links_a_runbook_section() {
    let runbook = read(&repo().join("docs/runbook.md"));
    let sections: BTreeSet<String> = runbook
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(heading_anchor)
        .collect();
    let rules = alert_rules();
    assert!(rules.len() >= 9, "{} alerts", rules.len());
    let mut problems = Vec::new();
    let mut read_metrics = BTreeSet::new();
    for rule in &rules {
        let name = str_at(rule, "/alert").unwrap_or_default();
        let expr = str_at(rule, "/expr").unwrap_or_default();
        let metrics = promql_metrics(expr);
        if metrics.is_empty() {
            problems.push(format!("{name}: {expr:?} selects no metric"));
        }
        for m in metrics {
            if !allowed_metric(&m) {
                problems.push(format!("{name}: {m} is not exported by the suite"));
            }
            read_metrics.insert(m);
        }
        if !matches!(str_at(rule, "/labels/severity"), Some("page" | "ticket")) {
            problems.push(format!("{name}: severity is neither page nor ticket"));
        }
        if str_at(rule, "/labels/owner").is_none_or(str::is_empty) {
            problems.push(format!("{name}: no owner label"));
        }
        match str_at(rule, "/annotations/runbook_url")
            .and_then(|url| url.strip_prefix("docs/runbook.md#"))
        {
            Some(anchor) if sections.contains(anchor) => {}
            other => problems.push(format!(
                "{name}: runbook_url {other:?} is no section of docs/runbook.md"
            )),
        }
    }
    // The witness's lag and refusals are alerts: an unattested release keeps its hold silently
    // otherwise, an unattested credit stays unspendable, and a refused one is a security event.
    for needed in [
        "opledger_witness_oldest_unwitnessed_seconds",
        "opledger_witness_examined_total",
        "opledger_witness_oldest_unwitnessed_credit_seconds",
        "opledger_witness_credits_examined_total",
        // A custodian withdrawal stuck at its provider, or escalated, keeps its hold silently
        // otherwise.
        "opledger_custodian_oldest_in_flight_seconds",
        "opledger_custodian_open_escalations",
    ] {
        if !read_metrics.contains(needed) {
            problems.push(format!("no alert reads {needed}"));
        }
    }
    assert_none(problems, "alert rules");
}

#[test]
fn every_alert_fires_in_a_promtool_case() {
    // promtool runs these cases (tests/reconciler/alerts.rs); a rule no case sees firing could
    // be one that never fires.
    let cases = yaml_doc(&deploy().join("prometheus/alerts.test.yml"));
    let fired: BTreeSet<&str> = array_at(&cases, "/tests")
        .iter()
        .flat_map(|case| array_at(case, "/alert_rule_test"))
        .filter(|check| !array_at(check, "/exp_alerts").is_empty())
        .filter_map(|check| str_at(check, "/alertname"))
        .collect();
    let rules = alert_rules();
    let missing: Vec<String> = rules
        .iter()
        .filter_map(|rule| str_at(rule, "/alert"))
        .filter(|name| !fired.contains(name))
        .map(str::to_owned)
        .collect();
    assert_none(missing, "alerts no case of alerts.test.yml sees firing");
}

#[test]
fn every_dashboard_query_names_only_metrics_the_suite_exports() {
    let dashboard = dashboard();
    let mut problems = Vec::new();
    let mut queried = BTreeSet::new();
    for panel in panels(&dashboard) {
        let title = str_at(panel, "/title").unwrap_or_default();
        for target in array_at(panel, "/targets") {
            let expr = str_at(target, "/expr").unwrap_or_default();
            let metrics = promql_metrics(expr);
            if metrics.is_empty() {
                problems.push(format!("{title}: {expr:?} selects no metric"));
            }
            for m in metrics {
                if !allowed_metric(&m) {
                    problems.push(format!("{title}: {m} is not exported by the suite"));
                }
                queried.insert(m);
            }
        }
    }
    for variable in array_at(&dashboard, "/templating/list") {
        let query = str_at(variable, "/query/query")
            .or_else(|| str_at(variable, "/query"))
            .unwrap_or_default();
        if let Some(metrics) = label_values_metric(query) {
            problems.extend(
                metrics
                    .into_iter()
                    .filter(|m| !allowed_metric(m))
                    .map(|m| format!("variable: {m}")),
            );
        }
    }
    // The panels the deployment promises.
    for needed in [
        "opledger_operations",
        "opledger_oldest_unresolved_seconds",
        "opledger_oldest_waiting_seconds",
        "opledger_escalations",
        "opledger_submissions_total",
        "opledger_grpc_requests_total",
        "opledger_grpc_request_duration_seconds_bucket",
        "opledger_inbox_requests_total",
        "opledger_inbox_quarantined_total",
        "opledger_inbox_unhandled_total",
        "opledger_inbox_dead_letters",
        "opledger_inbox_oldest_unresolved_seconds",
        "opledger_witness_oldest_unwitnessed_seconds",
        "opledger_witness_examined_total",
        "opledger_witness_oldest_unwitnessed_credit_seconds",
        "opledger_witness_credits_examined_total",
        "opledger_custodian_in_flight",
        "opledger_custodian_oldest_in_flight_seconds",
        "opledger_custodian_open_escalations",
    ] {
        if !queried.contains(needed) {
            problems.push(format!("no panel shows {needed}"));
        }
    }
    assert_none(problems, "dashboard queries");
}

#[test]
fn counters_are_shown_as_rates_not_raw_totals() {
    let mut problems = Vec::new();
    for panel in panels(&dashboard()) {
        for target in array_at(panel, "/targets") {
            let expr = str_at(target, "/expr").unwrap_or_default();
            for m in promql_metrics(expr) {
                let counter = METRICS
                    .iter()
                    .any(|(n, k)| *n == m && *k == MetricKind::Counter)
                    || m.ends_with("_bucket");
                if counter && !(expr.contains("rate(") || expr.contains("increase(")) {
                    problems.push(format!(
                        "{}: {m} is a counter shown raw",
                        str_at(panel, "/title").unwrap_or_default()
                    ));
                }
            }
        }
    }
    assert_none(problems, "raw counters");
}

#[test]
fn the_dashboard_takes_its_prometheus_datasource_from_a_variable() {
    let dashboard = dashboard();
    assert!(
        dashboard["schemaVersion"].as_u64().is_some_and(|v| v >= 36),
        "schemaVersion"
    );
    assert!(
        str_at(&dashboard, "/uid").is_some_and(|u| !u.is_empty()),
        "a stable uid"
    );
    let variable = array_at(&dashboard, "/templating/list")
        .iter()
        .find(|v| v["type"] == "datasource")
        .expect("a datasource variable");
    assert_eq!(str_at(variable, "/query"), Some("prometheus"));
    let reference = format!("${{{}}}", str_at(variable, "/name").expect("name"));
    let mut ids = BTreeSet::new();
    let mut problems = Vec::new();
    for panel in panels(&dashboard) {
        let title = str_at(panel, "/title").unwrap_or_default();
        if !ids.insert(
            panel["id"]
                .as_u64()
                .unwrap_or_else(|| panic!("{title}: no id")),
        ) {
            problems.push(format!("{title}: duplicate id"));
        }
        if panel.get("gridPos").is_none() {
            problems.push(format!("{title}: no gridPos"));
        }
        if panel["type"] == "row" {
            continue;
        }
        for ds in std::iter::once(&panel["datasource"])
            .chain(array_at(panel, "/targets").iter().map(|t| &t["datasource"]))
        {
            if str_at(ds, "/uid") != Some(reference.as_str())
                || str_at(ds, "/type") != Some("prometheus")
            {
                problems.push(format!("{title}: datasource {ds} is not {reference}"));
            }
        }
    }
    assert_none(problems, "dashboard datasources");
}

#[test]
fn grafana_provisions_the_dashboard_compose_mounts_and_the_compose_prometheus() {
    let provisioning = deploy().join("grafana/provisioning");
    let compose = compose();
    let grafana = &compose["services"]["grafana"];
    let volumes = strings(&grafana["volumes"]);
    assert!(
        volumes.contains(&"../grafana/provisioning:/etc/grafana/provisioning:ro".to_owned()),
        "{volumes:?}"
    );
    let mounted = volumes
        .iter()
        .find_map(|v| v.strip_prefix("../grafana/opledger.json:"))
        .and_then(|v| v.strip_suffix(":ro"))
        .expect("the dashboard is mounted");
    let providers = yaml_doc(&provisioning.join("dashboards/opledger.yaml"));
    let path = str_at(&providers, "/providers/0/options/path").expect("provider path");
    assert_eq!(
        Path::new(mounted).parent(),
        Some(Path::new(path)),
        "the provider reads where compose mounts"
    );
    let datasources = yaml_doc(&provisioning.join("datasources/prometheus.yaml"));
    let source = &array_at(&datasources, "/datasources")[0];
    assert_eq!(str_at(source, "/type"), Some("prometheus"));
    assert_eq!(str_at(source, "/url"), Some("http://prometheus:9090"));
    assert!(compose["services"].get("prometheus").is_some());
}

#[test]
fn every_allow_listed_metric_is_exported_by_the_source() {
    let mut sources = String::new();
    for dir in ["services", "crates"] {
        for file in files_under(&repo().join(dir), &[".rs"]) {
            sources.push_str(&read(&file));
        }
    }
    let missing: Vec<String> = METRICS
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| {
            !sources.contains(&format!("# TYPE {name} "))
                && !sources.contains(&format!("\"{name}\""))
        })
        .map(str::to_owned)
        .collect();
    assert_none(
        missing,
        "allow-listed metrics no source exports (as `# TYPE <name> ` or \"<name>\")",
    );
}
