//! Text for people, one JSON object per line for scripts. The formatters are pure; [`Output`]
//! only decides where a line goes. Broken pipes (`opctl list | head`) are ignored.

use crate::error::Failure;
use crate::review::Reviewed;
use crate::states::{executor_name, risk_flag_name, state_name};
use opledger_domain::payload::{PayloadField, WithdrawalPayload};
use opledger_proto::v1 as pb;
use prost_types::Timestamp;
use serde_json::{Map, Value, json};
use std::io::{IsTerminal, Write};
use std::time::{Duration, SystemTime};

/// A command's result in both forms.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// For people; printed as is (a trailing newline is added when missing).
    pub text: String,
    /// For scripts; printed on one line.
    pub json: Value,
}

/// Where results, errors and progress go.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    /// `--json`.
    pub json: bool,
    /// stdout is a terminal.
    pub tty: bool,
}

impl Output {
    /// JSON or text, on this process's stdout.
    pub fn new(json: bool) -> Output {
        Output {
            json,
            tty: std::io::stdout().is_terminal(),
        }
    }

    /// Prints a result on stdout.
    pub fn report(&self, report: &Report) {
        if self.json {
            self.json_line(&report.json);
        } else {
            self.text(&report.text);
        }
    }

    /// Prints one JSON object on one line of stdout.
    pub fn json_line(&self, value: &Value) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{value}");
        let _ = out.flush();
    }

    /// Prints text on stdout, ending with a newline.
    pub fn text(&self, text: &str) {
        let mut out = std::io::stdout().lock();
        let _ = if text.ends_with('\n') {
            write!(out, "{text}")
        } else {
            writeln!(out, "{text}")
        };
        let _ = out.flush();
    }

    /// Prints a failure: the JSON error object on stdout, or `error: ...` on stderr.
    pub fn failure(&self, failure: &Failure) {
        if self.json {
            self.json_line(&failure_json(failure));
        } else {
            let _ = write!(std::io::stderr().lock(), "{}", failure_text(failure));
        }
    }

    /// A note for people on stderr (never part of a result).
    pub fn note(&self, text: &str) {
        let _ = writeln!(std::io::stderr().lock(), "opctl: {text}");
    }

    /// Rewrites the current terminal line with `line`.
    pub fn progress(&self, line: &str) {
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "\r\x1b[2K{line}");
        let _ = out.flush();
    }
}

/// The JSON error object: `{"error":{"code","reason","message","metadata","violations"}}`.
pub fn failure_json(failure: &Failure) -> Value {
    let metadata: Map<String, Value> = failure
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let violations: Vec<Value> = failure
        .violations
        .iter()
        .map(|(field, description)| json!({"field": field, "description": description}))
        .collect();
    json!({
        "error": {
            "code": failure.code,
            "reason": failure.reason,
            "message": failure.message,
            "metadata": metadata,
            "violations": violations,
        }
    })
}

/// `error: <REASON>: <message>`, then metadata, violations and a hint for transient failures.
pub fn failure_text(failure: &Failure) -> String {
    let mut text = format!("error: {}: {}\n", failure.reason, failure.message);
    for (key, value) in &failure.metadata {
        text.push_str(&format!("  {key}: {value}\n"));
    }
    for (field, description) in &failure.violations {
        text.push_str(&format!("  {field}: {description}\n"));
    }
    let hint = match (failure.reason.as_str(), failure.metadata.get("field")) {
        ("INVALID_FIELD", Some(field)) => crate::error::field_hint(field),
        (reason, _) => crate::error::hint(reason),
    };
    if let Some(hint) = hint {
        text.push_str(&format!("  ({hint})\n"));
    }
    if failure.kind == crate::error::Kind::Transient {
        text.push_str(
            "  (transient: retrying is safe for idempotent calls; \
             repeat a create with the same --idempotency-key)\n",
        );
    }
    text
}

/// RFC 3339 in UTC with milliseconds.
pub fn rfc3339(ts: &Timestamp) -> String {
    let mut ts = *ts;
    ts.normalize();
    ts.nanos -= ts.nanos % 1_000_000;
    ts.to_string()
}

/// A wire timestamp as RFC 3339, `null` when absent.
fn timestamp_json(ts: Option<&Timestamp>) -> Value {
    ts.map_or(Value::Null, |t| Value::String(rfc3339(t)))
}

/// A wire timestamp as RFC 3339, `-` when absent.
fn timestamp_text(ts: Option<&Timestamp>) -> String {
    ts.map_or_else(|| "-".to_owned(), rfc3339)
}

/// Now, as a wire timestamp.
pub fn now() -> Timestamp {
    Timestamp::from(SystemTime::now())
}

/// `850ms`, `3.4s`, `2m05s`, `1h02m`.
pub fn elapsed(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1_000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{}.{}s", ms / 1_000, (ms % 1_000) / 100)
    } else {
        age(d.as_secs().try_into().unwrap_or(i64::MAX))
    }
}

/// An age in seconds: `45s`, `12m30s`, `3h04m`, `2d03h`.
pub fn age(secs: i64) -> String {
    let s = secs.max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3_600 => format!("{}m{:02}s", s / 60, s % 60),
        3_600..86_400 => format!("{}h{:02}m", s / 3_600, (s % 3_600) / 60),
        _ => format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3_600),
    }
}

/// A field of an answer for people: `-` when empty, control and direction characters escaped (so
/// that what a service or a provider wrote cannot move the cursor or reorder the line).
pub fn printable(text: &str) -> String {
    if text.is_empty() {
        "-".to_owned()
    } else {
        text.escape_debug().to_string()
    }
}

/// Left-aligned columns separated by two spaces; `empty` when there are no rows.
pub fn table(headers: &[&str], rows: &[Vec<String>], empty: &str) -> String {
    if rows.is_empty() {
        return format!("{empty}\n");
    }
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                let pad = widths[i].saturating_sub(cell.chars().count());
                out.push_str(cell);
                out.push_str(&" ".repeat(pad + 2));
            }
        }
        out.trim_end().to_owned() + "\n"
    };
    let mut text = line(headers.to_vec());
    for row in rows {
        text.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    text
}

/// The risk flags of a withdrawal by name.
pub fn risk_flags(w: &pb::Withdrawal) -> Vec<String> {
    w.risk_flags.iter().map(|f| risk_flag_name(*f)).collect()
}

/// A withdrawal for scripts.
pub fn withdrawal_json(w: &pb::Withdrawal) -> Value {
    let payload = w.payload.clone().unwrap_or_default();
    json!({
        "withdrawal_id": w.withdrawal_id,
        "state": state_name(w.state),
        "payload_hash": w.payload_hash,
        "version": w.version,
        "risk_flags": risk_flags(w),
        "executor": executor_name(w.executor),
        "payload": {
            "source_account": payload.source_account,
            "asset": payload.asset,
            "network": payload.network,
            "destination": payload.destination,
            "memo": payload.memo,
            "amount": payload.amount,
            "fee_cap": payload.fee_cap,
            "policy_version": payload.policy_version,
        },
        "create_time": timestamp_json(w.create_time.as_ref()),
        "update_time": timestamp_json(w.update_time.as_ref()),
    })
}

/// A withdrawal for people, one field per line.
pub fn withdrawal_text(w: &pb::Withdrawal) -> String {
    let payload = w.payload.clone().unwrap_or_default();
    let flags = risk_flags(w);
    let rows: [(&str, String); 15] = [
        ("withdrawal", w.withdrawal_id.clone()),
        (
            "state",
            format!("{} (version {})", state_name(w.state), w.version),
        ),
        ("payload hash", w.payload_hash.clone()),
        ("executor", executor_name(w.executor)),
        ("account", payload.source_account),
        ("asset", payload.asset),
        ("network", payload.network),
        ("destination", payload.destination),
        ("amount", payload.amount),
        ("fee cap", payload.fee_cap),
        ("memo", payload.memo.unwrap_or_else(|| "-".to_owned())),
        ("policy version", payload.policy_version.to_string()),
        (
            "risk flags",
            if flags.is_empty() {
                "none".to_owned()
            } else {
                flags.join(", ")
            },
        ),
        ("created", timestamp_text(w.create_time.as_ref())),
        ("updated", timestamp_text(w.update_time.as_ref())),
    ];
    let mut text = String::new();
    for (label, value) in rows {
        text.push_str(&format!("{label:<15}{value}\n"));
    }
    text
}

/// The label of a payload field where an approver reviews it.
fn payload_label(field: PayloadField) -> &'static str {
    match field {
        PayloadField::TenantId => "tenant",
        PayloadField::SourceAccount => "account",
        PayloadField::Asset => "asset",
        PayloadField::Network => "network",
        PayloadField::Destination => "destination",
        PayloadField::Memo => "memo",
        PayloadField::Amount => "amount",
        PayloadField::FeeCap => "fee cap",
        PayloadField::PolicyVersion => "policy version",
    }
}

/// A payload field as it enters the canonical encoding, `None` for an absent memo.
fn payload_value(p: &WithdrawalPayload, field: PayloadField) -> Option<String> {
    Some(match field {
        PayloadField::TenantId => p.tenant_id.to_string(),
        PayloadField::SourceAccount => p.source_account.as_str().to_owned(),
        PayloadField::Asset => p.asset.as_str().to_owned(),
        PayloadField::Network => p.network.as_str().to_owned(),
        PayloadField::Destination => p.destination.as_str().to_owned(),
        PayloadField::Memo => p.memo.as_ref()?.as_str().to_owned(),
        PayloadField::Amount => p.amount.to_string(),
        PayloadField::FeeCap => p.fee_cap.to_string(),
        PayloadField::PolicyVersion => p.policy_version.to_string(),
    })
}

/// Every field of the hashed payload, in canonical order, for people: the memo quoted with
/// invisible and direction-changing characters escaped (`none` when absent), so that two
/// payloads with different hashes never look the same.
pub fn payload_rows(p: &WithdrawalPayload) -> Vec<(&'static str, String)> {
    PayloadField::ALL
        .into_iter()
        .map(|field| {
            let value = match (field, payload_value(p, field)) {
                (PayloadField::Memo, Some(memo)) => format!("\"{}\"", memo.escape_debug()),
                (_, Some(value)) => value,
                (_, None) => "none".to_owned(),
            };
            (payload_label(field), value)
        })
        .collect()
}

/// Every field of the hashed payload for scripts, by wire name, exactly as hashed (`memo` null
/// when absent, `policy_version` a number).
pub fn payload_json(p: &WithdrawalPayload) -> Value {
    let map: Map<String, Value> = PayloadField::ALL
        .into_iter()
        .map(|field| {
            let value = match (field, payload_value(p, field)) {
                (PayloadField::PolicyVersion, _) => Value::from(p.policy_version),
                (_, Some(text)) => Value::String(text),
                (_, None) => Value::Null,
            };
            (field.as_str().to_owned(), value)
        })
        .collect();
    Value::Object(map)
}

/// What an approver is about to sign, shown before the statement is sent: the withdrawal, every
/// field of its payload (the ones hashed, nothing else) and the hash opctl computed from them.
pub fn reviewed_text(decision: &str, r: &Reviewed) -> String {
    let mut text = format!("signing {decision} for\n{:<15}{}\n", "withdrawal", r.id);
    for (label, value) in payload_rows(&r.payload) {
        text.push_str(&format!("{label:<15}{value}\n"));
    }
    text.push_str(&format!(
        "{:<15}{} (computed by opctl from the fields above)\n",
        "payload hash", r.hash
    ));
    text
}

/// Withdrawals as a table.
pub fn withdrawal_table(ws: &[pb::Withdrawal]) -> String {
    let rows: Vec<Vec<String>> = ws
        .iter()
        .map(|w| {
            let payload = w.payload.clone().unwrap_or_default();
            let flags = risk_flags(w);
            vec![
                w.withdrawal_id.clone(),
                state_name(w.state),
                payload.asset,
                payload.network,
                payload.amount,
                timestamp_text(w.create_time.as_ref()),
                if flags.is_empty() {
                    "-".to_owned()
                } else {
                    flags.join(",")
                },
            ]
        })
        .collect();
    table(
        &[
            "ID", "STATE", "ASSET", "NETWORK", "AMOUNT", "CREATED", "RISK",
        ],
        &rows,
        "no withdrawals",
    )
}

/// A balance in both forms: available, held by open withdrawals, and credits proposed but not
/// witnessed yet (pending, not spendable).
pub fn balance_report(b: &pb::Balance) -> Report {
    Report {
        text: balance_text(b),
        json: balance_json(b),
    }
}

/// A balance for people.
pub fn balance_text(b: &pb::Balance) -> String {
    let mut text = format!(
        "account    {}\nasset      {}\navailable  {}\nheld       {}\npending    {}\n",
        b.account, b.asset, b.available, b.held, b.pending
    );
    // Shown only when there is a debt (a release reopened after its funds were spent).
    if !b.owed.is_empty() && b.owed != "0" {
        text.push_str(&format!("owed       {}\n", b.owed));
    }
    text
}

/// A balance for scripts.
pub fn balance_json(b: &pb::Balance) -> Value {
    json!({
        "account": b.account,
        "asset": b.asset,
        "available": b.available,
        "held": b.held,
        "pending": b.pending,
        "owed": if b.owed.is_empty() { "0" } else { b.owed.as_str() },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Failure;
    use std::collections::BTreeMap;

    fn withdrawal() -> pb::Withdrawal {
        pb::Withdrawal {
            withdrawal_id: "0190c4c8-4b5d-7c6e-8f90-123456789abc".into(),
            payload: Some(pb::WithdrawalPayload {
                source_account: "treasury".into(),
                asset: "ETH".into(),
                network: "anvil".into(),
                destination: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8".into(),
                memo: None,
                amount: "5000".into(),
                fee_cap: "100".into(),
                policy_version: 1,
            }),
            payload_hash: "ab".repeat(32),
            state: pb::WithdrawalState::Requested as i32,
            risk_flags: vec![pb::RiskFlag::SameDestinationAndAmount as i32],
            version: 1,
            create_time: Some(Timestamp {
                seconds: 1_800_000_000,
                nanos: 123_456_789,
            }),
            update_time: None,
            executor: pb::Executor::LocalSigner as i32,
        }
    }

    #[test]
    fn withdrawals_render_with_short_names() {
        let w = withdrawal();
        let v = withdrawal_json(&w);
        assert_eq!(v["state"], "REQUESTED");
        assert_eq!(v["risk_flags"], json!(["SAME_DESTINATION_AND_AMOUNT"]));
        assert_eq!(v["payload"]["amount"], "5000");
        assert_eq!(v["payload"]["memo"], Value::Null);
        assert_eq!(v["create_time"], "2027-01-15T08:00:00.123Z");
        assert_eq!(v["update_time"], Value::Null);
        let text = withdrawal_text(&w);
        assert!(text.contains("state          REQUESTED (version 1)\n"));
        assert!(text.contains("risk flags     SAME_DESTINATION_AND_AMOUNT\n"));
        assert!(text.contains("updated        -\n"));
        let table = withdrawal_table(&[w]);
        let mut lines = table.lines();
        assert!(lines.next().is_some_and(|l| l.starts_with("ID  ")));
        assert!(
            lines
                .next()
                .is_some_and(|l| l.contains("  REQUESTED  ETH  "))
        );
        assert_eq!(withdrawal_table(&[]), "no withdrawals\n");
    }

    fn reviewed(memo: Option<&str>) -> Reviewed {
        use opledger_domain::amount::Amount;
        use opledger_domain::payload::{AccountName, AssetCode, Destination, Memo, NetworkId};
        let payload = WithdrawalPayload {
            tenant_id: "0190c4c8-0000-7c6e-8f90-123456789abc"
                .parse()
                .expect("uuid"),
            source_account: AccountName::parse("treasury").expect("account"),
            asset: AssetCode::parse("ETH").expect("asset"),
            network: NetworkId::parse("anvil").expect("network"),
            destination: Destination::parse("0x70997970c51812dc3a010c7d01b50e0d17dc79c8")
                .expect("destination"),
            memo: memo.map(|m| Memo::parse(m).expect("memo")),
            amount: Amount::parse("5000").expect("amount"),
            fee_cap: Amount::parse("100").expect("fee cap"),
            policy_version: 3,
        };
        Reviewed {
            id: "0190c4c8-4b5d-7c6e-8f90-123456789abc"
                .parse()
                .expect("uuid"),
            hash: payload.hash(),
            payload,
        }
    }

    /// What you see is what you sign: every hashed field is shown (text and JSON), nothing else
    /// of the payload, and the JSON form rebuilds to the very hash signed.
    #[test]
    fn what_an_approver_sees_is_exactly_what_is_hashed() {
        use opledger_domain::amount::Amount;
        use opledger_domain::payload::{AccountName, AssetCode, Destination, Memo, NetworkId};
        for memo in [None, Some("none"), Some("tag \u{202e}1337"), Some("-")] {
            let r = reviewed(memo);
            let rows = payload_rows(&r.payload);
            assert_eq!(rows.len(), PayloadField::ALL.len());
            let text = reviewed_text("APPROVE", &r);
            for (label, value) in &rows {
                assert!(text.contains(&format!("{label:<15}{value}\n")), "{text}");
            }
            assert!(text.contains(&r.hash.to_hex()));
            assert!(
                !text.contains('\u{202e}'),
                "direction changes are escaped: {text}"
            );
            let memo_row = rows
                .iter()
                .find(|(l, _)| *l == "memo")
                .map(|(_, v)| v.as_str());
            assert_eq!(
                memo_row,
                Some(match memo {
                    None => "none",
                    Some("none") => "\"none\"",
                    Some("-") => "\"-\"",
                    Some(_) => "\"tag \\u{202e}1337\"",
                })
            );
            let json = payload_json(&r.payload);
            let field = |name: &str| json[name].as_str().expect(name).to_owned();
            assert_eq!(
                json.as_object().map(|o| o.len()),
                Some(PayloadField::ALL.len())
            );
            let rebuilt = WithdrawalPayload {
                tenant_id: field("tenant_id").parse().expect("tenant"),
                source_account: AccountName::parse(&field("source_account")).expect("account"),
                asset: AssetCode::parse(&field("asset")).expect("asset"),
                network: NetworkId::parse(&field("network")).expect("network"),
                destination: Destination::parse(&field("destination")).expect("destination"),
                memo: json["memo"].as_str().map(|m| Memo::parse(m).expect("memo")),
                amount: Amount::parse(&field("amount")).expect("amount"),
                fee_cap: Amount::parse(&field("fee_cap")).expect("fee cap"),
                policy_version: json["policy_version"]
                    .as_u64()
                    .and_then(|v| u32::try_from(v).ok())
                    .expect("policy version"),
            };
            assert_eq!(rebuilt.hash(), r.hash);
        }
    }

    #[test]
    fn failures_render_as_the_documented_shapes() {
        let failure = Failure {
            kind: crate::error::Kind::Refused,
            code: "FAILED_PRECONDITION",
            reason: "EVIDENCE_MISMATCH".into(),
            message: "the chain evidence shows CONFIRMED".into(),
            metadata: BTreeMap::from([("evidence".into(), "CONFIRMED".into())]),
            violations: vec![],
        };
        assert_eq!(
            failure_json(&failure),
            json!({"error": {
                "code": "FAILED_PRECONDITION",
                "reason": "EVIDENCE_MISMATCH",
                "message": "the chain evidence shows CONFIRMED",
                "metadata": {"evidence": "CONFIRMED"},
                "violations": [],
            }})
        );
        assert_eq!(
            failure_text(&failure),
            "error: EVIDENCE_MISMATCH: the chain evidence shows CONFIRMED\n  evidence: CONFIRMED\n"
        );
        let io = std::io::Error::other("connection refused");
        let transient = Failure::unreachable("operations", "http://127.0.0.1:1", &io);
        let text = failure_text(&transient);
        assert!(text.starts_with("error: UNAVAILABLE: cannot connect to the operations service"));
        assert!(text.contains("transient"));
    }

    #[test]
    fn durations_and_ages_are_short() {
        assert_eq!(elapsed(Duration::from_millis(850)), "850ms");
        assert_eq!(elapsed(Duration::from_millis(3_456)), "3.4s");
        assert_eq!(elapsed(Duration::from_secs(125)), "2m05s");
        assert_eq!(age(-5), "0s");
        assert_eq!(age(45), "45s");
        assert_eq!(age(750), "12m30s");
        assert_eq!(age(3 * 3_600 + 4 * 60 + 9), "3h04m");
        assert_eq!(age(2 * 86_400 + 3 * 3_600), "2d03h");
    }

    #[test]
    fn tables_align_columns() {
        let text = table(
            &["A", "LONGER"],
            &[
                vec!["xyz".into(), "1".into()],
                vec!["q".into(), "22".into()],
            ],
            "none",
        );
        assert_eq!(text, "A    LONGER\nxyz  1\nq    22\n");
        assert_eq!(table(&["A"], &[], "none"), "none\n");
    }

    #[test]
    fn balances_render() {
        let r = balance_report(&pb::Balance {
            account: "treasury".into(),
            asset: "ETH".into(),
            available: "10".into(),
            held: "0".into(),
            pending: "5".into(),
            owed: "0".into(),
        });
        assert_eq!(r.json["available"], "10");
        assert_eq!(r.json["pending"], "5");
        assert_eq!(r.json["owed"], "0");
        assert!(r.text.contains("held       0"));
        assert!(r.text.contains("pending    5\n"));
        assert!(!r.text.contains("owed"));
        let owing = balance_report(&pb::Balance {
            available: "0".into(),
            owed: "7".into(),
            ..pb::Balance::default()
        });
        assert_eq!(owing.json["owed"], "7");
        assert!(owing.text.contains("owed       7\n"), "{}", owing.text);
    }
}
