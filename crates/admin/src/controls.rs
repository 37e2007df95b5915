//! `opledger-admin controls report`: the go/no-go table of the design's 13 mandatory controls,
//! built from evidence, never asserted.
//!
//! The evidence is the `control_NN_*` tests of the workspace: their results come from the JUnit
//! file cargo-nextest writes (`.config/nextest.toml`), either of a run this command starts or of
//! one already done (`--junit`, as `scripts/test.sh` does after the full suite). For each control
//! the report lists its tests, whether each passed, and what each test file asserts (the file's
//! module documentation); controls that are partly organisational also need their documents. A
//! row passes only when it has at least one test, every one of them passed, and every required
//! document exists. The verdict is GO only if all 13 rows pass. There is no score.

use anyhow::Context;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One mandatory control of the design: number, name, the evidence it asks for, and the
/// documents it needs besides tests.
struct Control {
    number: u8,
    name: &'static str,
    evidence: &'static str,
    documents: &'static [&'static str],
}

const CONTROLS: [Control; 13] = [
    Control {
        number: 1,
        name: "Tenant-scoped durable operation identity",
        evidence: "unique constraint on tenant and key; two tenants using the same key never see each other's results",
        documents: &[],
    },
    Control {
        number: 2,
        name: "Immutable approved payload hash bound to approval",
        evidence: "the signer recomputes the hash; a field mutated after approval is refused",
        documents: &[],
    },
    Control {
        number: 3,
        name: "Changed-payload key reuse rejected",
        evidence: "same key, different amount or destination, returns a defined error",
        documents: &[],
    },
    Control {
        number: 4,
        name: "Atomic claim by target-side conditional mutation",
        evidence: "many workers on one operation: exactly one claim succeeds",
        documents: &[],
    },
    Control {
        number: 5,
        name: "Ledger hold and operation creation in one transaction",
        evidence: "killing the process between steps leaves no orphan hold or operation",
        documents: &[],
    },
    Control {
        number: 6,
        name: "Signed artifact persisted before broadcast; only stored bytes rebroadcast",
        evidence: "a crash after signing resumes without a second signature",
        documents: &[],
    },
    Control {
        number: 7,
        name: "Ambiguous timeout becomes UNKNOWN; hold retained; no fresh submission before reconciliation",
        evidence: "the response is dropped after send; the operation ends reconciled with a single transfer",
        documents: &[],
    },
    Control {
        number: 8,
        name: "Inbound dedupe, inbox record and work scheduling committed atomically before 2xx",
        evidence: "kill-after-receive; duplicate and reordered deliveries",
        documents: &[],
    },
    Control {
        number: 9,
        name: "Terminal failure state with a named owner, alerting and held funds",
        evidence: "runbook; alert fired in a drill; oldest-unresolved-age metric",
        documents: &["docs/runbook.md", "deploy/prometheus/alerts.yml"],
    },
    Control {
        number: 10,
        name: "Uncertain input quarantined, never guessed",
        evidence: "unknown event type and same-id-different-body",
        documents: &[],
    },
    Control {
        number: 11,
        name: "Legitimate later operations are not suppressed",
        evidence: "same destination and amount with distinct keys both execute, subject to risk rules",
        documents: &[],
    },
    Control {
        number: 12,
        name: "Privacy ownership defined; keys and logs free of personal data",
        evidence: "named owners, log sampling review, retention schedule",
        documents: &["docs/privacy.md"],
    },
    Control {
        number: 13,
        name: "Serialization limits documented",
        evidence: "written statement of single-writer scope and failover behaviour",
        documents: &["docs/serialization.md"],
    },
];

/// One test case of a JUnit file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestCase {
    /// The suite (`package::binary`).
    pub suite: String,
    /// The test's path inside its binary (`module::function`).
    pub name: String,
    /// True when it passed.
    pub passed: bool,
}

fn attribute(tag: &str, name: &str) -> Option<String> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let end = tag[start..].find('"')? + start;
    Some(
        tag[start..end]
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&"),
    )
}

/// The test cases of a JUnit XML document (as cargo-nextest writes it).
pub fn parse_junit(xml: &str) -> Vec<TestCase> {
    let mut cases = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find("<testcase ") {
        rest = &rest[start..];
        let Some(tag_end) = rest.find('>') else { break };
        let tag = &rest[..tag_end];
        let self_closing = tag.ends_with('/');
        let body_end = if self_closing {
            tag_end
        } else {
            rest.find("</testcase>").unwrap_or(rest.len())
        };
        let body = &rest[tag_end..body_end];
        if let (Some(name), Some(suite)) = (attribute(tag, "name"), attribute(tag, "classname")) {
            cases.push(TestCase {
                suite,
                name,
                passed: !body.contains("<failure") && !body.contains("<error"),
            });
        }
        rest = &rest[body_end.max(1)..];
    }
    cases
}

/// The control number a test name gives evidence for (`control_NN_` in its last segment).
pub fn control_of(name: &str) -> Option<u8> {
    let function = name.rsplit("::").next()?;
    let digits = function.strip_prefix("control_")?.get(..3)?;
    let number: u8 = digits.strip_suffix('_')?.parse().ok()?;
    (1..=13).contains(&number).then_some(number)
}

/// The `//!` documentation of the source file defining `fn function(` under `roots`.
fn assertion_of(repo: &Path, function: &str) -> Option<(String, String)> {
    let needle = format!("fn {function}(");
    let mut stack: Vec<PathBuf> = ["tests", "crates", "services"]
        .iter()
        .map(|d| repo.join(d))
        .collect();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if !path.ends_with("target") {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs")
                && let Ok(text) = std::fs::read_to_string(&path)
                && text.contains(&needle)
            {
                let doc: Vec<&str> = text
                    .lines()
                    .take_while(|l| l.starts_with("//!"))
                    .map(|l| l.trim_start_matches("//!").trim())
                    .collect();
                let file = path
                    .strip_prefix(repo)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                return Some((file, doc.join(" ").trim().to_owned()));
            }
        }
    }
    None
}

/// One row of the report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    /// Control number, 1 to 13.
    pub control: u8,
    /// The control.
    pub name: &'static str,
    /// The evidence the design asks for.
    pub evidence_required: &'static str,
    /// PASS or FAIL.
    pub result: &'static str,
    /// Tests run / passed.
    pub tests: usize,
    /// Tests that passed.
    pub passed: usize,
    /// Each test: name, passed, file.
    pub test_results: Vec<serde_json::Value>,
    /// What each evidence file asserts (its module documentation).
    pub asserted: BTreeMap<String, String>,
    /// Documents the control needs and whether each exists.
    pub documents: BTreeMap<&'static str, bool>,
}

/// Builds the rows from test results and the repository's files.
pub fn rows(cases: &[TestCase], repo: &Path) -> Vec<Row> {
    CONTROLS
        .iter()
        .map(|control| {
            let mine: Vec<&TestCase> = cases
                .iter()
                .filter(|c| control_of(&c.name) == Some(control.number))
                .collect();
            let mut asserted = BTreeMap::new();
            let mut test_results = Vec::new();
            for case in &mine {
                let function = case.name.rsplit("::").next().unwrap_or(&case.name);
                let found = assertion_of(repo, function);
                if let Some((file, doc)) = &found {
                    asserted.insert(file.clone(), doc.clone());
                }
                test_results.push(serde_json::json!({
                    "test": format!("{} {}", case.suite, case.name),
                    "passed": case.passed,
                    "file": found.map(|(f, _)| f),
                }));
            }
            let documents: BTreeMap<&'static str, bool> = control
                .documents
                .iter()
                .map(|d| (*d, repo.join(d).is_file()))
                .collect();
            let passed = mine.iter().filter(|c| c.passed).count();
            let pass = !mine.is_empty() && passed == mine.len() && documents.values().all(|e| *e);
            Row {
                control: control.number,
                name: control.name,
                evidence_required: control.evidence,
                result: if pass { "PASS" } else { "FAIL" },
                tests: mine.len(),
                passed,
                test_results,
                asserted,
                documents,
            }
        })
        .collect()
}

/// The Markdown report.
pub fn markdown(rows: &[Row], go: bool, machine: &str) -> String {
    let mut out = format!(
        "# opledger go/no-go report\n\nVerdict: **{}** ({} of 13 controls pass; every control is \
         required, there is no score). Evidence: the `control_NN_*` tests of this build, run on \
         {machine}.\n\n| # | control | result | tests passed | evidence |\n|---|---|---|---|---|\n",
        if go { "GO" } else { "NO-GO" },
        rows.iter().filter(|r| r.result == "PASS").count()
    );
    for r in rows {
        let mut evidence: Vec<String> = r.asserted.keys().map(|f| format!("`{f}`")).collect();
        evidence.extend(
            r.documents
                .iter()
                .map(|(d, e)| format!("`{d}`{}", if *e { "" } else { " (MISSING)" })),
        );
        out.push_str(&format!(
            "| {} | {} | {} | {}/{} | {} |\n",
            r.control,
            r.name,
            r.result,
            r.passed,
            r.tests,
            evidence.join(", ")
        ));
    }
    out.push_str("\n## What the evidence asserts\n");
    for r in rows {
        out.push_str(&format!(
            "\n### {}. {} ({})\n\nRequired: {}.\n\n",
            r.control, r.name, r.result, r.evidence_required
        ));
        for (file, doc) in &r.asserted {
            out.push_str(&format!("- `{file}`: {doc}\n"));
        }
        for t in &r.test_results {
            out.push_str(&format!(
                "  - {} `{}`\n",
                if t["passed"].as_bool() == Some(true) {
                    "passed"
                } else {
                    "FAILED"
                },
                t["test"].as_str().unwrap_or_default()
            ));
        }
    }
    out
}

/// Runs the control tests with cargo-nextest from `repo` (the caller's environment must provide
/// what they need, as scripts/test.sh does) and returns the JUnit file it wrote.
fn run_evidence(repo: &Path) -> anyhow::Result<PathBuf> {
    let status = std::process::Command::new("cargo")
        .current_dir(repo)
        .args([
            "nextest",
            "run",
            "--workspace",
            "--no-fail-fast",
            "-E",
            "test(/control_[0-9][0-9]_/)",
        ])
        .status()
        .context("cannot run cargo nextest")?;
    if !status.success() {
        eprintln!("some control tests failed; the report shows which");
    }
    Ok(repo.join("target/nextest/default/junit.xml"))
}

/// The command: gathers evidence, writes `controls.md` and `controls.json` into `out`, prints the
/// Markdown, and returns whether the verdict is GO.
pub fn report(
    junit: Option<&Path>,
    repo: &Path,
    out: &Path,
    machine: &str,
) -> anyhow::Result<bool> {
    let junit = match junit {
        Some(path) => path.to_path_buf(),
        None => run_evidence(repo)?,
    };
    let xml = std::fs::read_to_string(&junit)
        .with_context(|| format!("cannot read test results {}", junit.display()))?;
    let cases = parse_junit(&xml);
    let rows = rows(&cases, repo);
    let go = rows.iter().all(|r| r.result == "PASS");
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let md = markdown(&rows, go, machine);
    std::fs::write(out.join("controls.md"), &md)?;
    let json = serde_json::json!({
        "verdict": if go { "GO" } else { "NO-GO" },
        "machine": machine,
        "controls": rows,
    });
    std::fs::write(
        out.join("controls.json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    print!("{md}");
    Ok(go)
}

#[cfg(test)]
mod tests {
    use super::*;

    const JUNIT: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="nextest-run" tests="3" failures="1" errors="0">
  <testsuite name="opledger-tests::operations" tests="2" failures="0" errors="0">
    <testcase name="control_01::control_01_two_tenants_one_key" classname="opledger-tests::operations" time="0.1">
    </testcase>
    <testcase name="create::plain" classname="opledger-tests::operations" time="0.1"/>
  </testsuite>
  <testsuite name="opledger-tests::inbox" tests="1" failures="1" errors="0">
    <testcase name="control_08::control_08_killed_after_commit" classname="opledger-tests::inbox" time="0.2">
      <failure type="test failure">assertion failed &amp; more</failure>
    </testcase>
  </testsuite>
</testsuites>"#;

    #[test]
    fn junit_cases_are_read_with_their_outcome() {
        let cases = parse_junit(JUNIT);
        assert_eq!(cases.len(), 3);
        assert!(cases[0].passed && cases[1].passed && !cases[2].passed);
        assert_eq!(cases[2].suite, "opledger-tests::inbox");
    }

    #[test]
    fn control_numbers_come_from_the_function_name_only() {
        assert_eq!(control_of("control_01::control_01_two_tenants"), Some(1));
        assert_eq!(control_of("a::control_13_x"), Some(13));
        assert_eq!(control_of("control_08::something_else"), None);
        assert_eq!(control_of("x::control_14_y"), None);
        assert_eq!(control_of("x::control_1_y"), None);
    }

    #[test]
    fn a_failed_or_missing_control_makes_the_verdict_no_go() {
        let cases = parse_junit(JUNIT);
        let rows = rows(&cases, Path::new("/nonexistent"));
        assert_eq!(rows.len(), 13);
        assert_eq!(rows[0].result, "PASS");
        assert_eq!(rows[7].result, "FAIL", "a failed test");
        assert_eq!(rows[1].result, "FAIL", "no test at all");
        assert_eq!(rows[8].result, "FAIL", "no test, no runbook");
        assert!(markdown(&rows, false, "m").contains("Verdict: **NO-GO** (1 of 13"));
    }
}
