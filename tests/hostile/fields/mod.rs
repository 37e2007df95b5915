//! Hostile field values over the generated clients, with valid credentials so that validation is
//! reached: every answer is OK or a typed error carrying an opledger `ErrorInfo` reason, never
//! INTERNAL or UNKNOWN; a value the domain's own parser refuses (amount, account, asset, network,
//! destination, memo, idempotency key) is never accepted; a mutated approval statement never
//! approves; hostile credentials are refused.

mod approvals;
mod credentials;
mod operations;
mod workers;

use crate::harness::{NEVER, Suite, Tally, rng_for};
use crate::values;
use crate::wire::code_name;
use futures::StreamExt;
use opledger_tests::ALICE;
use std::future::Future;
use tonic_types::StatusExt;

/// One request with its label and whether it may be accepted at all.
pub type Case<R> = (String, R, bool);

/// Sends every case through `call`, eight at a time, and records the answers: OK only where
/// allowed, any error typed with an opledger ErrorInfo.
pub async fn run<R, T, F, Fut>(tally: &mut Tally, method: &str, cases: Vec<Case<R>>, call: F)
where
    F: Fn(R) -> Fut,
    Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    let answers: Vec<(String, bool, Result<tonic::Response<T>, tonic::Status>)> =
        futures::stream::iter(cases.into_iter().map(|(label, request, may_succeed)| {
            let answer = call(request);
            async move { (label, may_succeed, answer.await) }
        }))
        .buffered(8)
        .collect()
        .await;
    for (label, may_succeed, answer) in answers {
        let case = format!("{method} {label}");
        match answer {
            Ok(_) => {
                tally.record(&case, "OK");
                tally.check(may_succeed, &case, || "a hostile value was accepted".into());
            }
            Err(status) => {
                let class = code_name(status.code());
                tally.record(&case, class);
                tally.check(!NEVER.contains(&class), &case, || {
                    let mut message = status.message().to_owned();
                    message.truncate(160);
                    format!("answered {class}: {message:?}")
                });
                let typed = status.get_error_details().error_info().is_some_and(|i| {
                    !i.reason.is_empty() && i.domain == opledger_proto::ERROR_DOMAIN
                });
                tally.check(typed, &case, || {
                    let mut message = status.message().to_owned();
                    message.truncate(160);
                    format!("{class} without an opledger ErrorInfo reason: {message:?}")
                });
            }
        }
    }
}

/// A domain parser's verdict: `true` when it accepts `text`.
pub fn accepts<T, E>(parse: fn(&str) -> Result<T, E>, text: &str) -> bool {
    parse(text).is_ok()
}

#[tokio::test]
async fn hostile_grpc_field_values() -> anyhow::Result<()> {
    const TEST: &str = "hostile_grpc_field_values";
    let (mut rng, seed) = rng_for(TEST)?;
    let suite = Suite::start().await?;
    let mut tally = Tally::new(TEST, seed);
    let texts = values::texts(&mut rng);
    // A pending withdrawal whose real approval and rejection statements are mutated below.
    let pending = suite
        .world
        .stack
        .withdraw(suite.acme(), "1000", ALICE)
        .await?;
    operations::batch(&suite, &mut tally, &texts).await?;
    suite
        .check_alive(&mut tally, "hostile values to operations")
        .await;
    approvals::batch(&suite, &mut tally, &mut rng, &texts, &pending).await?;
    suite
        .check_alive(&mut tally, "hostile values to approvals")
        .await;
    workers::batch(&suite, &mut tally, &texts, &pending).await?;
    suite
        .check_alive(&mut tally, "hostile values to signer, reconciler and inbox")
        .await;
    credentials::batch(&suite, &mut tally).await?;
    suite.check_alive(&mut tally, "hostile credentials").await;
    tally.finish()
}
