//! Hostile bodies under valid signatures at the webhook ingress: nesting 10,000 deep, huge
//! numbers, duplicate keys, lone surrogates, NUL, non-UTF-8, JSON that is not an object, bodies
//! over the limit. Each is answered 2xx (stored and acknowledged, perhaps as unhandled or a dead
//! letter to be) or 4xx, never 5xx and never a hang; afterwards the processor has worked off every
//! stored item (none is left pending) and the ingress still acknowledges a normal event.

use crate::harness::{Suite, Tally, rng_for};
use crate::values::{U128_MAX, U128_MAX_PLUS_ONE};
use futures::StreamExt;
use opledger_tests::inbox::{World, event_id, eventually};
use rand::Rng;
use std::time::Duration;

/// The account hostile deposits name, so that no liveness check depends on it.
const ACCOUNT: &str = "hostile-hook";

/// Signs `body` with the endpoint's secret now and posts it; the answer's class.
async fn post_signed(world: &World, body: Vec<u8>) -> String {
    let id = event_id();
    let now = chrono::Utc::now().timestamp();
    let signature = opledger_webhook::verify::sign_v1(&world.ep.secret, &id, now, &body);
    let headers = [
        ("webhook-id", id),
        ("webhook-timestamp", now.to_string()),
        ("webhook-signature", signature),
    ];
    match world
        .sender
        .send_raw(&world.sender.url(&world.ep), &headers, body)
        .await
    {
        Ok((status, _)) => status.to_string(),
        Err(e)
            if e.downcast_ref::<reqwest::Error>()
                .is_some_and(reqwest::Error::is_timeout) =>
        {
            "timeout".to_owned()
        }
        Err(_) => "closed".to_owned(),
    }
}

/// A deposit body whose `data` members are exactly `data` (raw JSON text).
fn deposit_with(data: &str) -> String {
    format!(
        r#"{{"type":"deposit.confirmed","timestamp":"2026-12-01T00:00:00Z","data":{{{data}}}}}"#
    )
}

/// A deposit of `amount` (raw JSON: a string in quotes or a bare number) to the hostile account.
fn deposit_amount(amount: &str) -> String {
    deposit_with(&format!(
        r#""deposit_id":"{}","account":"{ACCOUNT}","asset":"ETH","amount":{amount}"#,
        event_id()
    ))
}

fn bodies(rng: &mut impl Rng) -> Vec<(String, Vec<u8>)> {
    let deep = 10_000;
    let nested_arrays = format!("{}{}", "[".repeat(deep), "]".repeat(deep));
    let nested_objects = format!("{}1{}", r#"{"a":"#.repeat(deep), "}".repeat(deep));
    let id = event_id();
    let mut text: Vec<(&str, String)> = vec![
        ("nested_arrays_10000", nested_arrays.clone()),
        ("nested_objects_10000", nested_objects.clone()),
        ("nested_unbalanced_10000", "[".repeat(deep)),
        ("nested_inside_data", deposit_with(&format!(r#""deposit_id":"{id}","account":"{ACCOUNT}","asset":"ETH","amount":"1","x":{nested_arrays}"#))),
        ("nested_type", format!(r#"{{"type":{nested_objects}}}"#)),
        ("amount_number_1e400", deposit_amount("1e400")),
        ("amount_number_minus_1e400", deposit_amount("-1e400")),
        ("amount_number_1e-400", deposit_amount("1e-400")),
        ("amount_400_digit_number", deposit_amount(&"9".repeat(400))),
        ("amount_400_digit_string", deposit_amount(&format!("\"{}\"", "9".repeat(400)))),
        ("amount_u128_max_plus_one", deposit_amount(&format!("\"{U128_MAX_PLUS_ONE}\""))),
        ("amount_u128_max_as_number", deposit_amount(U128_MAX)),
        ("amount_negative", deposit_amount("\"-1\"")),
        ("amount_fraction", deposit_amount("\"1.5\"")),
        ("amount_exponent_string", deposit_amount("\"1e18\"")),
        ("amount_hex", deposit_amount("\"0x10\"")),
        ("amount_empty", deposit_amount("\"\"")),
        ("amount_padded", deposit_amount("\" 1\"")),
        ("amount_zero", deposit_amount("\"0\"")),
        ("amount_null", deposit_amount("null")),
        ("amount_object", deposit_amount(r#"{"value":"1"}"#)),
        ("amount_minus_zero_number", deposit_amount("-0")),
        ("timestamp_1e400", format!(r#"{{"type":"deposit.confirmed","timestamp":1e400,"data":{{"deposit_id":"{}","account":"{ACCOUNT}","asset":"ETH","amount":"1"}}}}"#, event_id())),
        ("duplicate_type", format!(r#"{{"type":"deposit.confirmed","type":"kyt.result","data":{{"deposit_id":"{}","account":"{ACCOUNT}","asset":"ETH","amount":"1"}}}}"#, event_id())),
        ("duplicate_amount", deposit_with(&format!(r#""deposit_id":"{}","account":"{ACCOUNT}","asset":"ETH","amount":"1","amount":"1000000000""#, event_id()))),
        ("duplicate_account", deposit_with(&format!(r#""deposit_id":"{}","account":"{ACCOUNT}","account":"treasury","asset":"ETH","amount":"1""#, event_id()))),
        ("duplicate_data", format!(r#"{{"type":"deposit.confirmed","data":{{"deposit_id":"a","account":"{ACCOUNT}","asset":"ETH","amount":"1"}},"data":{{"deposit_id":"b","account":"{ACCOUNT}","asset":"ETH","amount":"2"}}}}"#)),
        ("lone_high_surrogate_in_id", deposit_with(&format!(r#""deposit_id":"\ud800","account":"{ACCOUNT}","asset":"ETH","amount":"1""#))),
        ("lone_low_surrogate_in_account", deposit_with(r#""deposit_id":"s2","account":"\udc00","asset":"ETH","amount":"1""#)),
        ("surrogate_then_letter", deposit_with(&format!(r#""deposit_id":"\ud800\u0041","account":"{ACCOUNT}","asset":"ETH","amount":"1""#))),
        ("lone_surrogate_in_type", r#"{"type":"deposit.confirmed\ud800","data":{}}"#.to_owned()),
        ("escaped_nul_in_account", deposit_with(r#""deposit_id":"n1","account":"hostile\u0000hook","asset":"ETH","amount":"1""#)),
        ("escaped_nul_in_id", deposit_with(&format!(r#""deposit_id":"n2\u0000","account":"{ACCOUNT}","asset":"ETH","amount":"1""#))),
        ("escaped_nul_in_type", r#"{"type":"deposit.confirmed\u0000","data":{}}"#.to_owned()),
        ("escaped_nul_key", format!(r#"{{"type":"deposit.confirmed","\u0000":1,"data":{{"deposit_id":"{}","account":"{ACCOUNT}","asset":"ETH","amount":"1"}}}}"#, event_id())),
        ("account_traversal", deposit_with(r#""deposit_id":"t1","account":"../../etc","asset":"ETH","amount":"1""#)),
        ("account_10k", deposit_with(&format!(r#""deposit_id":"t2","account":"{}","asset":"ETH","amount":"1""#, "a".repeat(10_000)))),
        ("asset_fullwidth", deposit_with(&format!(r#""deposit_id":"t3","account":"{ACCOUNT}","asset":"ＥＴＨ","amount":"1""#))),
        ("deposit_id_100k", deposit_with(&format!(r#""deposit_id":"{}","account":"{ACCOUNT}","asset":"ETH","amount":"1""#, "d".repeat(100_000)))),
        ("deposit_without_data", r#"{"type":"deposit.confirmed"}"#.to_owned()),
        ("deposit_data_array", r#"{"type":"deposit.confirmed","data":[1,2,3]}"#.to_owned()),
        ("kyt_bad_operation", r#"{"type":"kyt.result","data":{"operation_id":"not-a-uuid","result":"FAIL","provider_ref":"x"}}"#.to_owned()),
        ("kyt_nil_operation", r#"{"type":"kyt.result","data":{"operation_id":"00000000-0000-0000-0000-000000000000","result":"FAIL","provider_ref":"x"}}"#.to_owned()),
        ("kyt_result_nul", format!(r#"{{"type":"kyt.result","data":{{"operation_id":"{}","result":"FAIL\u0000","provider_ref":"x"}}}}"#, uuid::Uuid::now_v7())),
        ("transfer_status_huge_hash", format!(r#"{{"type":"transfer.status","data":{{"operation_id":"{}","status":"confirmed","tx_hash":"0x{}"}}}}"#, uuid::Uuid::now_v7(), "ab".repeat(50_000))),
        ("transfer_status_bad_status", format!(r#"{{"type":"transfer.status","data":{{"operation_id":"{}","status":"\u202edenifnoc","tx_hash":"0x00"}}}}"#, uuid::Uuid::now_v7())),
        ("type_number", r#"{"type":1}"#.to_owned()),
        ("type_null", r#"{"type":null}"#.to_owned()),
        ("type_array", r#"{"type":["deposit.confirmed"]}"#.to_owned()),
        ("type_missing", r#"{"data":{}}"#.to_owned()),
        ("unknown_type", r#"{"type":"account.drained","data":{}}"#.to_owned()),
        ("empty_object", "{}".to_owned()),
        ("null", "null".to_owned()),
        ("array", "[]".to_owned()),
        ("number", "1".to_owned()),
        ("number_1e400", "1e400".to_owned()),
        ("string", "\"deposit.confirmed\"".to_owned()),
        ("true", "true".to_owned()),
        ("empty", String::new()),
        ("whitespace", " \t\r\n ".to_owned()),
        ("bom_then_object", format!("\u{feff}{}", deposit_amount("\"1\""))),
        ("trailing_garbage", format!("{}xyz", deposit_amount("\"1\""))),
        ("two_objects", format!("{0}{0}", deposit_amount("\"1\""))),
        ("comment", format!("/* hi */{}", deposit_amount("\"1\""))),
        ("trailing_comma", r#"{"type":"deposit.confirmed","data":{},}"#.to_owned()),
        ("single_quotes", "{'type':'deposit.confirmed'}".to_owned()),
        ("nan_literal", deposit_amount("NaN")),
        ("flat_array_100k", format!(r#"{{"type":"deposit.confirmed","data":[{}0]}}"#, "0,".repeat(100_000))),
        ("keys_20k", format!(r#"{{"type":"deposit.confirmed",{}"data":{{}}}}"#, (0..20_000).map(|i| format!("\"k{i}\":0,")).collect::<String>())),
        ("string_250k", format!(r#"{{"type":"deposit.confirmed","data":{{"memo":"{}"}}}}"#, "s".repeat(250_000))),
        ("over_limit_300k", format!(r#"{{"type":"deposit.confirmed","data":{{"memo":"{}"}}}}"#, "s".repeat(300_000))),
    ];
    let random: String = (0..rng.random_range(1..2000))
        .map(|_| char::from(rng.random_range(b' '..=b'~')))
        .collect();
    text.push(("random_printable", random));
    let mut out: Vec<(String, Vec<u8>)> = text
        .into_iter()
        .map(|(l, t)| (l.to_owned(), t.into_bytes()))
        .collect();
    let raw: Vec<(&str, Vec<u8>)> = vec![
        ("raw_nul_in_string", b"{\"type\":\"deposit.confirmed\0\",\"data\":{}}".to_vec()),
        ("raw_nul_between_tokens", b"{\"type\":\0\"deposit.confirmed\"}".to_vec()),
        ("invalid_utf8_in_string", b"{\"type\":\"\xff\xfe\",\"data\":{}}".to_vec()),
        ("invalid_utf8_in_account", [b"{\"type\":\"deposit.confirmed\",\"data\":{\"deposit_id\":\"u1\",\"account\":\"\xc0\xaf\",\"asset\":\"ETH\",\"amount\":\"1\"}}".as_slice()].concat()),
        ("encoded_surrogate_bytes", b"{\"type\":\"deposit.confirmed\",\"data\":{\"deposit_id\":\"\xed\xa0\x80\"}}".to_vec()),
        ("latin1", b"{\"type\":\"d\xe9p\xf4t\"}".to_vec()),
        ("utf16le_with_bom", [&[0xff, 0xfe][..], &"{\"type\":\"deposit.confirmed\"}".encode_utf16().flat_map(u16::to_le_bytes).collect::<Vec<u8>>()].concat()),
        ("random_bytes", (0..rng.random_range(1..4096)).map(|_| rng.random()).collect()),
    ];
    out.extend(raw.into_iter().map(|(l, b)| (l.to_owned(), b)));
    out
}

#[tokio::test]
async fn hostile_webhook_bodies() -> anyhow::Result<()> {
    const TEST: &str = "hostile_webhook_bodies";
    let (mut rng, seed) = rng_for(TEST)?;
    let suite = Suite::start().await?;
    let mut tally = Tally::new(TEST, seed);
    let world = &suite.world;
    let cases = bodies(&mut rng);
    let answers: Vec<String> = futures::stream::iter(
        cases
            .iter()
            .map(|(_, body)| post_signed(world, body.clone())),
    )
    .buffered(8)
    .collect()
    .await;
    for ((label, _), class) in cases.iter().zip(&answers) {
        tally.record(label, class);
        tally.check(class.starts_with(['2', '4']), label, || {
            format!("a signed hostile body answered {class}")
        });
    }
    // Whatever was stored is worked off: applied, a dead letter, unhandled or parked, never left
    // pending because the processor choked on it.
    let settled = eventually(Duration::from_secs(30), || async {
        Ok(world.rows("inbox_work", "AND status = 'PENDING'").await? == 0)
    })
    .await;
    if let Err(e) = settled {
        let outcomes = world.outcomes().await.unwrap_or_default();
        tally.fail(
            "processor",
            format!("stored hostile events still pending: {e:#} ({outcomes:?})"),
        );
    }
    eprintln!(
        "hostile: {TEST} stored work items by status:outcome: {:?}",
        summarize(world.outcomes().await?)
    );
    suite
        .check_alive(&mut tally, "hostile webhook bodies")
        .await;
    tally.finish()
}

/// `status:outcome` values with their counts.
fn summarize(outcomes: Vec<String>) -> std::collections::BTreeMap<String, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for outcome in outcomes {
        *counts.entry(outcome).or_default() += 1;
    }
    counts
}
