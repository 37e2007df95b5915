//! The fault schedule is a pure function of (seed, rule, reference, call index): two doubles
//! with the same seed make the same decisions for the same references, whatever the order of
//! the requests; another seed makes others.

mod common;

use common::*;
use opledger_testkit::Anvil;
use serde_json::{Value, json};

fn rules() -> Value {
    json!([
        {"kind": "rate_limit", "rate": 0.3},
        {"kind": "error_after_accept", "rate": 0.3, "status": 502},
        {"kind": "reject", "rate": 0.5},
    ])
}

/// For each reference, in order, the faults logged for its calls.
async fn decisions(sim: &Sim, references: &[String]) -> anyhow::Result<Vec<Vec<Value>>> {
    let mut all = Vec::new();
    for reference in references {
        let faults = sim
            .requests_of(reference)
            .await?
            .iter()
            .map(|r| r["faults"].clone())
            .collect();
        all.push(faults);
    }
    Ok(all)
}

async fn run(seed: u64, references: &[String], reverse: bool) -> anyhow::Result<Vec<Vec<Value>>> {
    let sim = Sim::start_on(Anvil::start().await?, |c| {
        c["faults"] = json!({"seed": seed, "rules": rules()});
    })
    .await?;
    let mut order: Vec<&String> = references.iter().collect();
    if reverse {
        order.reverse();
    }
    let to = fresh_address();
    let calls = order.iter().map(|reference| {
        let body = fb_body(reference, &to, "0.000001");
        let sim = &sim;
        async move {
            for _ in 0..2 {
                sim.fb_create(&body, None).await?;
            }
            Ok::<_, anyhow::Error>(())
        }
    });
    for result in futures::future::join_all(calls).await {
        result?;
    }
    decisions(&sim, references).await
}

#[tokio::test]
async fn same_seed_same_faults_whatever_the_order() -> anyhow::Result<()> {
    let references: Vec<String> = (0..12).map(|_| reference()).collect();
    let first = run(42, &references, false).await?;
    let again = run(42, &references, true).await?;
    assert_eq!(first, again);
    let applied = first.iter().flatten().filter(|f| f != &&json!([])).count();
    assert!(applied > 0, "{first:?}");
    let other = run(43, &references, false).await?;
    assert_ne!(first, other);
    Ok(())
}
