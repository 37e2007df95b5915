//! The red team: each scenario plays one adversary of `shared/THREAT-MODEL.md` (named in the
//! scenario) against the real signer, a real PostgreSQL with the project's roles, and checks that
//! nothing is signed: zero attempts, zero nonces taken, a security event recorded, the withdrawal's
//! state and hold unchanged. The suite ends with one line: attempts tried, refused, signed.

mod bytes;
mod credits;
mod facts;
mod forge;
mod freeze;
mod gate;
mod witness;

use forge::Outcome;

#[tokio::test]
async fn redteam_every_forgery_is_refused_and_nothing_is_signed() -> anyhow::Result<()> {
    let mut scenarios = forge::scenarios();
    scenarios.extend(bytes::scenarios());
    scenarios.extend(credits::scenarios());
    scenarios.extend(facts::scenarios());
    scenarios.extend(freeze::scenarios());
    scenarios.extend(witness::scenarios());
    let tried = scenarios.len();
    let results = futures::future::join_all(scenarios.into_iter().map(|(name, run)| async move {
        let outcome = run.await;
        (name, outcome)
    }))
    .await;
    let (mut refused, mut signed, mut released, mut credited) = (0, 0, 0, 0);
    let mut failures = Vec::new();
    for (name, outcome) in results {
        match outcome {
            Ok(Outcome::Refused) => {
                refused += 1;
                println!("redteam: {name}: refused");
            }
            Ok(Outcome::Signed) => {
                signed += 1;
                failures.push(format!("{name}: SIGNED"));
            }
            Ok(Outcome::Released) => {
                released += 1;
                failures.push(format!("{name}: RELEASED"));
            }
            Ok(Outcome::Credited) => {
                credited += 1;
                failures.push(format!("{name}: CREDITED"));
            }
            Err(e) => failures.push(format!("{name}: scenario failed: {e:#}")),
        }
    }
    println!(
        "redteam: attempts={tried} refused={refused} signed={signed} released={released} \
         credited={credited}"
    );
    assert!(failures.is_empty(), "{failures:#?}");
    assert_eq!((signed, released, credited), (0, 0, 0));
    assert_eq!(refused, tried);
    Ok(())
}

#[tokio::test]
async fn redteam_honest_signed_facts_are_still_signed() -> anyhow::Result<()> {
    // The baseline of the signed-facts scenarios: a provider-signed KYT pass and approvals that
    // acknowledge the flags they were shown are signed.
    facts::honest_screened_and_acknowledged_withdrawals_are_signed().await
}

#[tokio::test]
async fn redteam_an_honest_signed_approval_is_still_signed() -> anyhow::Result<()> {
    // The baseline every scenario is measured against: with the same set-up and no forgery,
    // the signer signs exactly once.
    forge::honest_withdrawal_is_signed().await
}

#[tokio::test]
async fn control_02_forged_and_copied_approvals_are_never_signed() -> anyhow::Result<()> {
    // Control 2's evidence against forged approvals: an approval row is a claim; only a
    // signature by a registered approver key over this exact payload hash counts.
    for (name, run) in forge::scenarios()
        .into_iter()
        .filter(|(name, _)| name.contains("approval_row") || name.contains("copied"))
    {
        assert_eq!(run.await?, Outcome::Refused, "{name}");
    }
    Ok(())
}
